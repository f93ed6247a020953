package testkit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdStranger is what etcdctl does for whoever runs it with no password:
// as a client of the etcd at urls (over TLS with cfg when not nil,
// showing cfg's certificate if it has one), it tries every read and
// write etcdctl offers — keys, watches, members, status, users, roles,
// leases, snapshots, alarms, turning authentication off — and the
// client port's HTTP paths. It returns one line for each that answered
// or landed, naming what it learned or did; a closed directory gives
// none. It writes only under /stranger/ and fenec's node n1.
func EtcdStranger(tb testing.TB, urls []string, cfg *tls.Config) []string {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, TLS: cfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil // not even a connection: nothing learned
	}
	defer cli.Close()
	var got []string
	try := func(what string, fn func(ctx context.Context) (string, error)) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		said, err := fn(ctx)
		if err == nil {
			got = append(got, what+": "+said)
		}
	}
	try("read every key", func(ctx context.Context) (string, error) {
		r, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithLimit(3))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d keys, e.g. %v", r.Count, r.Kvs), nil
	})
	if !answers(cli) {
		return got // no answer at all, the handshake refused: nothing more to learn
	}
	try("count fenec's keys", func(ctx context.Context) (string, error) {
		r, err := cli.Get(ctx, "/fenec/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.Count), nil
	})
	try("put a key", func(ctx context.Context) (string, error) {
		_, err := cli.Put(ctx, "/stranger/k", "v")
		return "/stranger/k", err
	})
	try("point node n1 elsewhere", func(ctx context.Context) (string, error) {
		_, err := cli.Put(ctx, "/fenec/nodes/n1", `{"addr":"http://127.0.0.1:9","token":"t","region":"local"}`)
		return "/fenec/nodes/n1", err
	})
	try("delete fenec's leader record", func(ctx context.Context) (string, error) {
		_, err := cli.Delete(ctx, "/fenec/meta/leader")
		return "/fenec/meta/leader", err
	})
	try("a transaction", func(ctx context.Context) (string, error) {
		_, err := cli.Txn(ctx).Then(clientv3.OpPut("/stranger/t", "v")).Commit()
		return "/stranger/t", err
	})
	try("watch fenec's keys", func(ctx context.Context) (string, error) {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		for r := range cli.Watch(wctx, "/fenec/", clientv3.WithPrefix(), clientv3.WithRev(1)) {
			if err := r.Err(); err != nil {
				return "", err
			}
			if len(r.Events) > 0 {
				return fmt.Sprintf("%d events", len(r.Events)), nil
			}
		}
		return "", wctx.Err()
	})
	try("list members", func(ctx context.Context) (string, error) {
		r, err := cli.MemberList(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.Members), nil
	})
	try("add a member", func(ctx context.Context) (string, error) {
		_, err := cli.MemberAddAsLearner(ctx, []string{"http://127.0.0.1:9"})
		return "a learner", err
	})
	try("status", func(ctx context.Context) (string, error) {
		r, err := cli.Status(ctx, urls[0])
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("db %d bytes, raft index %d", r.DbSize, r.RaftIndex), nil
	})
	try("snapshot", func(ctx context.Context) (string, error) {
		rc, err := cli.Snapshot(ctx)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		n, err := io.Copy(io.Discard, rc)
		return fmt.Sprintf("%d bytes", n), err
	})
	try("list alarms", func(ctx context.Context) (string, error) {
		_, err := cli.AlarmList(ctx)
		return "alarms", err
	})
	try("hash the keys", func(ctx context.Context) (string, error) {
		r, err := cli.HashKV(ctx, urls[0], 0)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.Hash), nil
	})
	try("list users", func(ctx context.Context) (string, error) {
		r, err := cli.UserList(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.Users), nil
	})
	try("add a user", func(ctx context.Context) (string, error) {
		_, err := cli.UserAdd(ctx, "stranger", "stranger")
		return "stranger", err
	})
	try("list roles", func(ctx context.Context) (string, error) {
		r, err := cli.RoleList(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.Roles), nil
	})
	try("turn authentication off", func(ctx context.Context) (string, error) {
		_, err := cli.AuthDisable(ctx)
		return "off", err
	})
	try("grant a lease", func(ctx context.Context) (string, error) {
		r, err := cli.Grant(ctx, 60)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.ID), nil
	})
	try("list leases", func(ctx context.Context) (string, error) {
		r, err := cli.Leases(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(len(r.Leases)), nil
	})
	for _, path := range []string{"/metrics", "/debug/vars"} {
		try("GET "+path, func(ctx context.Context) (string, error) { return httpGet(ctx, urls[0]+path, cfg) })
	}
	return got
}

// httpGet reads url's answer, an error unless 200.
func httpGet(ctx context.Context, url string, cfg *tls.Config) (string, error) {
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 200))
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", res.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

// answers says whether the etcd cli dials answers it at all, if only to
// refuse: a client whose handshake is refused waits out every call.
func answers(cli *clientv3.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := cli.Get(ctx, "/")
	if err == nil {
		return true
	}
	var etcdErr rpctypes.EtcdError // the server's own answer, if only a refusal
	return errors.As(rpctypes.Error(err), &etcdErr)
}
