package forward

import "errors"

// Sentinel errors of the forwarding path. They map to statuses in one
// table (forwardStatus in status.go).
var (
	// ErrBadTenant: the target's tenant segment is not [a-z0-9_-]{1,64}.
	ErrBadTenant = errors.New("tenant name must be [a-z0-9_-]{1,64}")
	// ErrBadTarget: the request target is not below /t/<tenant>/.
	ErrBadTarget = errors.New("request target is not /t/<tenant>/...")
	// ErrUnknownTenant: no placement names the tenant.
	ErrUnknownTenant = errors.New("unknown tenant: no placement names it; create it with PUT /_shard/tenants/<name>")
	// ErrUnknownInRegion: a region's router knows no tenant of that name
	// (Config.Region).
	ErrUnknownInRegion = errors.New("unknown tenant in this router's region: neither a tenant of the region nor one homed elsewhere with a copy in it has that name; " +
		"a tenant of another region is served by that region's routers or the global tier's (give it a read copy here, PUT /_shard/tenants/<name>/read-copies on the global tier's leading router, and this region's routers serve it too); " +
		"a new one is created with PUT /_shard/tenants/<name>")
	// ErrNotReady: the router's placements have not arrived yet.
	ErrNotReady = errors.New("placements have not arrived yet; retry in a moment")
	// ErrBodyTooLarge: the request body passes the router's bound.
	ErrBodyTooLarge = errors.New("request body too large; send it in smaller batches")
	// ErrBodyMemory: the router holds as many request bodies as it may.
	ErrBodyMemory = errors.New("this router holds as many request bodies in memory as it may at once (--max-body-memory): retry after Retry-After seconds, and send large writes as several smaller batches")
	// ErrBodyMemoryAddr: the client's address holds its share of them.
	ErrBodyMemoryAddr = errors.New("your address holds as many request bodies in this router's memory as one address may at once (--max-body-memory-per-addr): wait for the requests you have in flight, send large writes in turn rather than side by side, and retry after Retry-After seconds; clients behind one proxy share its address")
	// ErrBodyStalled: the client's body sent no byte for --body-timeout.
	ErrBodyStalled = errors.New("request body stopped arriving: send it again, with no pause longer than the router's --body-timeout between its bytes")
	// ErrBodyRead: the client's body could not be read whole.
	ErrBodyRead = errors.New("read request body")
	// ErrUntrustedNode: the directory's record of the tenant's node did
	// not pass the router's check (Target.Refused).
	ErrUntrustedNode = errors.New("the directory's record of this tenant's node did not pass this router's check (its sealed token does not open here, or is held in clear), so nothing was sent to it: the router's log says which; record the node again with PUT /_shard/nodes/<node>")
	// ErrUnreachable: the node refused the connection or could not be reached.
	ErrUnreachable = errors.New("node unreachable; retry, and if the node is gone, fail it over with POST /_shard/nodes/<node>/failover")
	// ErrMayHaveRun: a write was sent whole and its connection ended before
	// an answer; the node may have run it.
	ErrMayHaveRun = errors.New("node connection ended after the request was sent; it may have run: read it back before sending it again, and send writes with an Idempotency-Key to make a retry safe")
	// ErrUpstreamTimeout: the node did not answer within --upstream-timeout.
	ErrUpstreamTimeout = errors.New("node did not answer within the upstream timeout; a write may have run: read it back before sending it again")
	// ErrBadAnswer: the node's answer was not HTTP the router can pass on.
	ErrBadAnswer = errors.New("node sent an answer that could not be read")
	// ErrNotSent: the request could not be sent whole, even on a fresh connection.
	ErrNotSent = errors.New("request could not be sent to the node")
	// ErrReplicationFeed: a tenant's replication feed asked of the router,
	// which serves it to no one.
	ErrReplicationFeed = errors.New("a tenant's replication feed is served by nodes to their copies only, never through the router: a copy follows its primary's node directly (POST /_admin/tenants/<t>/follow on the copy's node)")
	// ErrClosed: the forwarder has been closed.
	ErrClosed = errors.New("forwarder is closed")
	// ErrBadConfig: a configuration value is out of range. The router's
	// own configuration refuses with it too (region.ErrBadConfig is it).
	ErrBadConfig = errors.New("bad router configuration")
)
