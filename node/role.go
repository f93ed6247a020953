package node

import "fmt"

// replicaRefusal is the write gate's answer on a replica's file: 503
// with Retry-After and Fenec-Refused: replica, naming the tenant.
type replicaRefusal struct{ tenant string }

func (e replicaRefusal) Error() string {
	return fmt.Sprintf("this node holds a copy of tenant %s; write to its primary", e.tenant)
}

func (e replicaRefusal) Is(target error) bool { return target == ErrReplica }
