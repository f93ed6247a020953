// Package tokenfile reads a bearer token from a file: the --…-token-file
// flags of fenec's binaries, so a token need not sit on a command line
// where every user of the machine can read it.
package tokenfile

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// ErrEmpty: the file's first line holds no token.
var ErrEmpty = errors.New("no token on the file's first line")

// maxLine bounds the line read: a token is short, and a file that is not
// one should not be read whole.
const maxLine = 4096

// Read returns the first line of the file at path, spaces and a trailing
// carriage return cut off; a file whose first line is empty is an error.
func Read(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256), maxLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("token file %s: %w", path, err)
		}
		return "", fmt.Errorf("token file %s: %w", path, ErrEmpty)
	}
	tok := strings.TrimSpace(sc.Text())
	if tok == "" {
		return "", fmt.Errorf("token file %s: %w", path, ErrEmpty)
	}
	return tok, nil
}

// FlagPath is Flag that also keeps the file's path in *path, for the
// process to read the token again (on SIGHUP).
func FlagPath(fs *flag.FlagSet, name string, dst, path *string, what string) {
	fs.Func(name+"-file", "read "+what+" from the first line of `PATH` (instead of --"+name+"), again on SIGHUP", func(p string) error {
		tok, err := Read(p)
		if err != nil {
			return err
		}
		*dst, *path = tok, p
		return nil
	})
}

// Flag registers --NAME-file on fs: the token in the file's first line is
// stored in *dst as the flag is parsed (given after --NAME, it wins).
func Flag(fs *flag.FlagSet, name string, dst *string, what string) {
	fs.Func(name+"-file", "read "+what+" from the first line of `PATH` (instead of --"+name+")", func(path string) error {
		tok, err := Read(path)
		if err != nil {
			return err
		}
		*dst = tok
		return nil
	})
}
