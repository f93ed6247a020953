package lead

import (
	"errors"
	"fmt"
)

// Sentinel errors of the lead. The leasing's ErrNotLeader is this one; the
// router's error table (package region) maps both to their statuses.
var (
	// ErrNotLeader: this router does not take changes (a standby, or one
	// a promotion moved past). A NotLeaderError is it.
	ErrNotLeader = errors.New("this router does not lead: changes go to the leader")
	// ErrNotReady: the router's view of its directory has not arrived in
	// time, so whether it leads cannot be told. Its text is the router's
	// ErrNotReady's (package region/forward), which this package may not
	// import.
	ErrNotReady = errors.New("placements have not arrived yet; retry in a moment")
)

// NotLeaderError names the router that leads (empty when none does).
type NotLeaderError struct {
	Leader string
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return "this router does not lead, and no router leads"
	}
	return fmt.Sprintf("this router does not lead: changes go to %s (term %d)", e.Leader, e.Term)
}

// Is makes a NotLeaderError ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
