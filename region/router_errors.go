package region

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/internal/reqpath"
	"github.com/fenec-go/fenec/region/copies"
	"github.com/fenec-go/fenec/region/failover"
	"github.com/fenec-go/fenec/region/forward"
	"github.com/fenec-go/fenec/region/lead"
	"github.com/fenec-go/fenec/region/leasing"
	"github.com/fenec-go/fenec/region/merge"
	"github.com/fenec-go/fenec/region/nodeapi"
	"github.com/fenec-go/fenec/region/repair"
	"github.com/fenec-go/fenec/region/trust"
	"github.com/fenec-go/fenec/wire"
)

// Sentinel errors of the router's control plane (/_shard/, moves, the
// lead). They map to statuses in one table, shardStatus below.
var (
	// ErrGlobalUnreachable: a region's router cannot reach the global
	// directory for a step that needs it (503).
	ErrGlobalUnreachable = errors.New("the global directory cannot be reached")
	// ErrMirrored: a change sent to a router that serves a copy of the
	// global directory.
	ErrMirrored = errors.New("this router serves its region from a copy of the global directory: placements change at the global tier's leading router; send the change there")
	// ErrGlobalAnswers: a forced takeover asked while the global
	// directory answers the region's link (forceGuard): a planned handoff
	// is the way, or force it with "even_if_global_answers".
	ErrGlobalAnswers = errors.New("forced takeover refused: the global directory answers")
	// ErrBadRequest: the request's body or parameters are not what the
	// route takes.
	ErrBadRequest = errors.New("bad request")
	// ErrNoRoute: no such /_shard/ route.
	ErrNoRoute = errors.New("no such route")
	// ErrMethod: the route does not take the request's method.
	ErrMethod = errors.New("method not allowed")
	// ErrUnknownRegion: no node or region record names that region.
	ErrUnknownRegion = errors.New("unknown region")
	// ErrNodeInUse: the node still holds a tenant (or a copy, or a move's
	// target).
	ErrNodeInUse = errors.New("node still holds tenants")
	// ErrNodeAnswers: a failover asked only of a node that does not
	// answer ({"if_down": true}) found it answering.
	ErrNodeAnswers = errors.New("node answers")
	// ErrNoCandidate: no node of the region can take a tenant.
	ErrNoCandidate = repair.ErrNoCandidate
	// ErrCopyBehind: a new copy did not take its primary's image in time.
	ErrCopyBehind = repair.ErrCopyBehind
	// ErrSameNode: a move onto the node already serving the tenant.
	ErrSameNode = repair.ErrSameNode
	// ErrQuotaChanged: a quota PUT's If-Match names limits the tenant no
	// longer has.
	ErrQuotaChanged = errors.New("the quota changed since it was read")
	// ErrStopping: the router is shutting down.
	ErrStopping = errors.New("router is shutting down: send the request to another router")
	// ErrReadTimeout: a tenant's read of a cross-tenant read was not
	// answered within its timeout_ms; that tenant is listed with it,
	// its text naming the bound ("timed out after N ms").
	ErrReadTimeout = errors.New("timed out")
	// ErrImageRefused: the node refused a restore's image (not a fenec
	// tenant file, damaged, cut short); the tenant is as it was.
	ErrImageRefused = errors.New("the image was refused")
	// ErrImageLineage: a restore's image is of another lineage than the
	// tenant's, and the restore was not forced.
	ErrImageLineage = errors.New("the image is of another lineage than the tenant's")
	// ErrImageTooLarge: a restore's image passed the node's bound (the
	// tenant's bytes quota, or --max-image).
	ErrImageTooLarge = errors.New("the image is larger than the node takes")
)

// Sentinels of the forwarding path the control plane answers with too:
// the same values, so errors.Is holds across the two tiers.
var (
	// ErrUnknownTenant: no placement names the tenant.
	ErrUnknownTenant = forward.ErrUnknownTenant
	// ErrNotReady: the router's placements have not arrived yet.
	ErrNotReady = forward.ErrNotReady
	// ErrBodyStalled: a request body sent no byte for --body-timeout.
	ErrBodyStalled = forward.ErrBodyStalled
	// ErrBadConfig: a configuration value is out of range.
	ErrBadConfig = forward.ErrBadConfig
)

// Sentinels of the leasing the control plane answers with too: the same
// values, so errors.Is holds across the two.
var (
	// ErrNotLeader: this router does not take changes (a standby, or one
	// that saw another take the lead); the lead's and the leasing's.
	ErrNotLeader = lead.ErrNotLeader
	// ErrUnknownNode: no node of that name is recorded.
	ErrUnknownNode = leasing.ErrUnknownNode
	// ErrNodeCall: an admin call to a node failed or was refused.
	ErrNodeCall = leasing.ErrNodeCall
)

// Sentinels of the router's certificate, secrets and token (region/trust)
// the control plane answers with: the same values, so errors.Is holds
// across the two.
var (
	// ErrUnauthorized: the router token is missing or wrong.
	ErrUnauthorized = trust.ErrUnauthorized
	// ErrBackoff: too many missing or wrong router tokens from this
	// client's address.
	ErrBackoff = trust.ErrBackoff
	// ErrClientCert: under --tls-client-auth admin, a /_shard/ or
	// /_metrics call without a client certificate the router trusts.
	ErrClientCert = trust.ErrClientCert
	// ErrInsecure: a non-loopback listener or etcd URL with no token, no
	// TLS or no client certificates, and no --insecure.
	ErrInsecure = trust.ErrInsecure
	// ErrSecrets: the router lacks the directory's key or password, which
	// every router of a deployment holds alike.
	ErrSecrets = trust.ErrSecrets
)

// Sentinels of the node client (region/nodeapi) the control plane answers
// with: the same values, so errors.Is holds across the two.
var (
	// ErrTenantExists: the tenant is already placed.
	ErrTenantExists = nodeapi.ErrTenantExists
	// ErrNodeCheck: the node did not answer its admin token.
	ErrNodeCheck = nodeapi.ErrNodeCheck
	// ErrAnswerTooLarge: a tenant's answer to a cross-tenant read passed
	// maxTenantAnswer; that tenant is listed with it.
	ErrAnswerTooLarge = nodeapi.ErrAnswerTooLarge
)

// Sentinels of a tenant's copies across regions (region/copies) the
// control plane answers with: the same values, so errors.Is holds across
// the two.
var (
	// ErrReadCopy: a read copy cannot be placed or kept where asked (409).
	ErrReadCopy = copies.ErrReadCopy
	// ErrSurvive: a tenant's survival cannot be set or kept as asked (409).
	ErrSurvive = copies.ErrSurvive
)

// Sentinels of a node's failover (region/failover) the control plane
// answers with: the same values, so errors.Is holds across the two.
var (
	// ErrNoReplica: the tenant has no copy to promote, or no node to take
	// one.
	ErrNoReplica = failover.ErrNoReplica
	// ErrReplicaBehind: a failover refused because the directory records
	// the tenant's copy behind: promoting it would lose answered writes.
	ErrReplicaBehind = failover.ErrReplicaBehind
	// ErrRestoreBroken: a failover of the node a restore was streaming to
	// ended the restore's hold and cancelled it (409).
	ErrRestoreBroken = failover.ErrRestoreBroken
)

// heldError says which operation holds a tenant; it is global.ErrHeld.
type heldError struct {
	tenant, by string
}

func (e *heldError) Error() string {
	return fmt.Sprintf("tenant %s is held by another operation (%s): ask again once it ends (GET /_shard/tenants shows held_by until then)", e.tenant, e.by)
}

func (e *heldError) Is(target error) bool { return target == global.ErrHeld }

// shardStatus is the control plane's one table from error to status, read
// in order (the first match wins); anything else is 500.
var shardStatus = []struct {
	err  error
	code int
}{
	{ErrUnauthorized, http.StatusUnauthorized},
	{ErrBackoff, http.StatusTooManyRequests},
	{ErrClientCert, http.StatusForbidden},
	{ErrNotLeader, http.StatusConflict},
	{ErrReadCopy, http.StatusConflict},
	{ErrSurvive, http.StatusConflict},
	{ErrMirrored, http.StatusConflict},
	{ErrFarTenant, http.StatusConflict},
	{ErrBodyStalled, http.StatusRequestTimeout},
	{ErrNotOwner, http.StatusConflict},
	{global.ErrWrongDirectory, http.StatusConflict},
	{global.ErrHandoffState, http.StatusConflict},
	{global.ErrEpochBound, http.StatusConflict},
	{ErrGlobalAnswers, http.StatusConflict},
	{ErrHandingOver, http.StatusServiceUnavailable},
	{ErrGlobalUnreachable, http.StatusServiceUnavailable},
	{ErrBadRequest, http.StatusBadRequest},
	{reqpath.ErrBadPath, http.StatusBadRequest},
	{ErrImageRefused, http.StatusBadRequest},
	{ErrImageLineage, http.StatusConflict},
	{ErrRestoreBroken, http.StatusConflict},
	{ErrImageTooLarge, http.StatusRequestEntityTooLarge},
	{merge.ErrBadRule, http.StatusBadRequest},
	{merge.ErrTooManyRows, http.StatusBadRequest},
	{wire.ErrBadQuota, http.StatusBadRequest},
	{global.ErrInvalidName, http.StatusBadRequest},
	{global.ErrInvalidRecord, http.StatusBadRequest},
	{ErrNoRoute, http.StatusNotFound},
	{ErrMethod, http.StatusMethodNotAllowed},
	{ErrUnknownNode, http.StatusNotFound},
	{ErrUnknownRegion, http.StatusNotFound},
	{ErrUnknownTenant, http.StatusNotFound},
	{ErrTenantExists, http.StatusConflict},
	{ErrNodeInUse, http.StatusConflict},
	{ErrNodeAnswers, http.StatusConflict},
	{ErrSameNode, http.StatusConflict},
	{ErrNodeTwice, http.StatusConflict},
	{ErrOtherNode, http.StatusConflict},
	{ErrCopyBehind, http.StatusBadGateway},
	{ErrStandbyNode, http.StatusConflict},
	{global.ErrHeld, http.StatusConflict},
	{ErrQuotaChanged, http.StatusConflict},
	{global.ErrState, http.StatusConflict},
	{global.ErrConflict, http.StatusConflict},
	{ErrNoCandidate, http.StatusConflict},
	{ErrNodeCheck, http.StatusBadGateway},
	{ErrNodeCall, http.StatusBadGateway},
	{ErrNotReady, http.StatusServiceUnavailable},
	{lead.ErrNotReady, http.StatusServiceUnavailable}, // the view not arrived as a change asks the lead
	{ErrStopping, http.StatusServiceUnavailable},
	{global.ErrClosed, http.StatusServiceUnavailable},
}

// shardCode returns err's status by the table.
func shardCode(err error) int {
	for _, row := range shardStatus {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	return http.StatusInternalServerError
}

// shardErrorBody is err as an answer body: {"error": ...} plus what a
// refusal names (the leader, the holding operation).
func shardErrorBody(err error) map[string]any {
	body := map[string]any{"error": err.Error()}
	var nl *lead.NotLeaderError
	if errors.As(err, &nl) {
		body["leader"] = nl.Leader
		body["term"] = nl.Term
	} else if errors.Is(err, global.ErrConflict) {
		// Lost a race with another change to the same records: the request
		// is judged again against what landed when it is sent again.
		body["error"] = err.Error() + ": another change to the directory landed first; look again (GET) and send the request again if it still applies"
	}
	var he *heldError
	if errors.As(err, &he) {
		body["held_by"] = he.by
	}
	if errors.Is(err, ErrNodeAnswers) {
		body["answers"] = true
	}
	var qc *quotaChangedError
	if errors.As(err, &qc) {
		body["quota"] = qc.now
		body["etag"] = quotaTag(qc.now)
	}
	return body
}
