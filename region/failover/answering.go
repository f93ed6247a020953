package failover

import (
	"context"

	"github.com/fenec-go/fenec/global"
)

// Answering says whether node n answers its admin token now as the node
// recorded (its id, where one is recorded), and the id it answers with:
// what a failover asked only of a node that is down checks first.
func (f *Failover) Answering(ctx context.Context, n global.Node) (string, bool) {
	id, err := f.deps.Nodes.Identify(ctx, n)
	if err != nil || (n.ID != "" && id != n.ID) {
		return "", false
	}
	if id == "" {
		id = "not recorded"
	}
	return id, true
}
