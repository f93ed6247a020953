package engine

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "FENEC_ENGINE_CRASH_PATH"

// blockSize is the number of puts in each block the crash writer lands.
const blockSize = 7

// TestCrashWriter is the child process of TestCrashSafety: it appends
// blocks of blockSize puts under SyncAlways and prints each acknowledged
// block's seq, until it is killed.
func TestCrashWriter(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as TestCrashSafety's child process")
	}
	var db *DB
	var err error
	if _, statErr := os.Stat(path); statErr != nil {
		db, err = Create(path, Options{Sync: SyncAlways, NoSweep: true})
		if err == nil {
			_, _, err = db.Exec(context.Background(), Statement{Query: "create collection c (block int @hash, k int, pad text)"})
		}
	} else {
		db, err = Open(path, Options{Sync: SyncAlways, NoSweep: true})
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("ready") // the file and its collection are in place: kill from now on
	out := bufio.NewWriter(os.Stdout)
	pad := strings.Repeat("p", 300)
	for b := int(db.Seq()); ; b++ {
		docs := make([]any, blockSize)
		for k := range docs {
			docs[k] = map[string]any{"block": int64(b), "k": int64(k), "pad": pad}
		}
		_, seq, err := db.Exec(context.Background(), Statement{Query: "put c $1", Params: []any{docs}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "ack %d %d\n", seq, b)
		out.Flush()
	}
}

// TestCrashSafety kills a writer at random moments and checks after each
// kill that every acknowledged block is in the file and no block is half.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	path := filepath.Join(t.TempDir(), "crash.fenec")
	rng := rand.New(rand.NewPCG(11, 12))
	deadline := time.Now().Add(3 * time.Second)
	acked := map[int64]bool{} // block numbers acknowledged
	rounds := 0
	for rounds < 4 || time.Now().Before(deadline) {
		rounds++
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// The kill is timed from the writer's "ready", not its start: a
		// loaded machine can take longer than the kill's delay to start a
		// test binary, and a writer killed before it made the file leaves
		// nothing to check.
		after := time.Duration(20+rng.IntN(200)) * time.Millisecond
		var kill <-chan time.Time
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if l == "ready" {
					kill = time.After(after)
					continue
				}
				recordAck(t, l, acked)
			case <-kill:
				_ = cmd.Process.Signal(syscall.SIGKILL)
				kill = nil
			}
		}
		_ = cmd.Wait()
		checkCrashFile(t, path, acked)
	}
	if len(acked) == 0 {
		t.Fatal("the writer acknowledged nothing")
	}
	t.Logf("%d rounds, %d blocks acknowledged", rounds, len(acked))
}

func recordAck(t *testing.T, line string, acked map[int64]bool) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) == 3 && f[0] == "ack" {
		b, _ := strconv.ParseInt(f[2], 10, 64)
		acked[b] = true
		return
	}
	if len(f) > 0 && f[0] == "error" {
		t.Fatalf("writer: %s", line)
	}
}

func checkCrashFile(t *testing.T, path string, acked map[int64]bool) {
	t.Helper()
	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer db.Close()
	res, _, err := db.Exec(context.Background(), Statement{Query: "get c select block, count(*) as n group block"})
	if err != nil {
		t.Fatal(err)
	}
	have := map[int64]int64{}
	for _, r := range res.Rows {
		have[r["block"].(int64)] = r["n"].(int64)
	}
	for b, n := range have {
		if n != blockSize {
			t.Fatalf("block %d has %d of %d puts", b, n, blockSize)
		}
	}
	for b := range acked {
		if have[b] != blockSize {
			t.Fatalf("acknowledged block %d lost", b)
		}
	}
	if want := uint64(1 + blockSize*len(have)); db.Seq() != want {
		t.Fatalf("seq %d, want %d", db.Seq(), want)
	}
}
