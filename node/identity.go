package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/fenec-go/fenec/wire"
)

// A node's identity: a random id made at its first start and kept in its
// directory (IDFileName), so that the same node is known as the same node
// whatever address reaches it. A router records the id with the node,
// refuses to record one node under two names, and asks the id again before
// it deletes anything on a node. An admin request naming an id
// (wire.HeaderNode) is refused (409) by any node that is not that one, so
// a call meant for one node that reaches another (an address re-pointed)
// changes nothing there.

// IDFileName is the file in a node's directory holding its id. It cannot
// be mistaken for a tenant file (those end in .fenec).
const IDFileName = "node.id"

// idLen is the length of an id: 16 random bytes in hex.
const idLen = 32

// loadID reads the node's id from dir, making one on the first start. A
// damaged id file is refused: the node would no longer be the one its
// routers recorded.
func loadID(dir string) (string, error) {
	path := filepath.Join(dir, IDFileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !validID(id) {
			return "", fmt.Errorf("%s is damaged (want %d hex digits): restore it from a backup of this directory, or remove it and record the node with its routers again", IDFileName, idLen)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", IDFileName, err)
	}
	var raw [idLen / 2]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := writeFileAtomic(dir, path, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

// validID says whether s is an id as loadID makes them.
func validID(s string) bool {
	if len(s) != idLen {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// notThisNode is an admin request meant for another node.
type notThisNode struct{ want, id string }

func (e *notThisNode) Error() string {
	return fmt.Sprintf("this is node %s, not %s: the address reached another node than the one recorded; record the node again with its router", e.id, e.want)
}

func (e *notThisNode) Is(target error) bool { return target == ErrNotThisNode }

// meantForMe refuses (and answers) an admin request naming another node
// (wire.HeaderNode).
func (c *call) meantForMe() bool {
	want := c.r.Header.Get(wire.HeaderNode)
	if want == "" || want == c.s.id {
		return true
	}
	c.failWith(&notThisNode{want: want, id: c.s.id}, map[string]any{"node": c.s.id})
	return false
}

// adminNode answers GET /_admin/node: the node's id.
func (c *call) adminNode() {
	if c.method(http.MethodGet) {
		writeJSON(c.w, http.StatusOK, wire.Identity{ID: c.s.id})
	}
}

// ID is the node's id (IDFileName).
func (s *Server) ID() string { return s.id }
