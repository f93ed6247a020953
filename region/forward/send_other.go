//go:build !unix

package forward

import (
	"errors"
	"net"
)

var errAgain = errors.New("would block")

// sendSocket is not used here: every write goes through the connection.
type sendSocket struct{}

func (ss *sendSocket) init(net.Conn)                      {}
func (ss *sendSocket) ok() bool                           { return false }
func (ss *sendSocket) waitAfter(func(uintptr) bool) error { return nil }
func (ss *sendSocket) write(uintptr, []byte) (int, error) { return 0, errAgain }
