package region

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fenec-go/fenec/global"
	"github.com/fenec-go/fenec/region/trust"
)

// The router's certificate, the directory's key and password, and the
// router token are package region/trust's (Router.trust), wired here over
// the router's logger, goroutines, lead and view. The router's own
// surface (/_shard/, /_metrics) takes the router token, and keeps the
// nodes' bad-token back-off: an address that sent too many wrong or
// missing tokens within a minute is answered 429 with Retry-After, whatever
// token it sends, while an address that presented the right token lately
// is still heard (trust.Authorize says the whole).

// wireTrust reads the router's TLS files and the directory's secrets as
// the router starts, and points the directory's links and the forwarder's
// calls to nodes at them.
func (rt *Router) wireTrust() error {
	t, err := trust.Load(rt.cfg.trustConfig(), trust.Deps{
		Log: rt.log,
		Go:  func(job func(context.Context)) { rt.wg.Go(func() { job(rt.ctx) }) },
		Changes: func(ctx context.Context) (*global.Store, error) {
			return rt.lead.Changes(ctx)
		},
		Settle: rt.settleTo,
	})
	if err != nil {
		return err
	}
	rt.trust = t
	rt.cfg.Etcd.TLS = rt.cfg.trustConfig().EtcdFiles()
	rt.cfg.Forward.TLS = t.Client
	return nil
}

// Reload reads the router's TLS files (also read whenever they change)
// and its token file again now. On an error the router keeps what it had
// of the files that failed.
func (rt *Router) Reload() error { return rt.trust.Reload() }

// authorize checks a call to the router's own surface (trust.Authorize):
// one without the client certificate --tls-client-auth admin asks for is
// answered 403, a missing or wrong token 401 with WWW-Authenticate, one
// from an address held off 429 with Retry-After; each token refused is
// counted and audited.
func (rt *Router) authorize(w http.ResponseWriter, r *http.Request) bool {
	err := rt.trust.Authorize(r, time.Now())
	switch {
	case err == nil:
		return true
	case errors.Is(err, trust.ErrClientCert):
		cpError(w, err)
		return false
	case errors.Is(err, trust.ErrBackoff):
		rt.metrics.refused.WithLabelValues("held_off").Inc()
	default:
		w.Header().Set("WWW-Authenticate", `Bearer realm="fenec-shard"`)
		rt.metrics.refused.WithLabelValues("unauthorized").Inc()
	}
	cpError(w, err)
	// Counted against the address, not a line each: a stranger's flood
	// costs the log two lines a minute (package audit).
	e := rt.auditOf(r, "auth", "", "", err, shardCode(err))
	e.Path = r.URL.Path
	if aerr := rt.audit.Refused(trust.ClientKey(r), e); aerr != nil {
		rt.log.Error("audit", "err", aerr)
	}
	return false
}
