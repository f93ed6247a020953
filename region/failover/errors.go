package failover

import (
	"errors"
	"fmt"
)

// Sentinel errors of a failover. The router answers with the same values
// (package region), so errors.Is holds across the two.
var (
	// ErrNoReplica: the tenant has no copy to promote, or no node to take
	// one.
	ErrNoReplica = errors.New("no replica")
	// ErrReplicaBehind: a failover refused because the directory records
	// the tenant's copy behind: promoting it would lose answered writes
	// (a forced failover promotes it all the same).
	ErrReplicaBehind = errors.New("replica recorded behind")
	// ErrCopyLost: the tenant's copy is on a node whose lease lapsed too
	// (Deps.CopyLost): not promoted.
	ErrCopyLost = errors.New("copy's node lost too")
	// ErrRestoreBroken: a failover of the node a restore was streaming to
	// ended the restore's hold and cancelled it (restore.go).
	ErrRestoreBroken = errors.New("restore cancelled by a failover")
)

// RestoreBroken is a restore of Tenant a failover of Node ended; it is
// ErrRestoreBroken.
type RestoreBroken struct {
	Tenant, Node string
}

func (e *RestoreBroken) Error() string {
	return fmt.Sprintf("%s: node %s, which it was restoring tenant %s on, was failed over, and %s is now served by its copy as it was "+
		"before this restore began (the image may or may not have reached %s, which no longer serves it): restore it again",
		ErrRestoreBroken.Error(), e.Node, e.Tenant, e.Tenant, e.Node)
}

func (e *RestoreBroken) Unwrap() error { return ErrRestoreBroken }
