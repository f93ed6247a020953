package global

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultPrefix is where fenec's keys live in etcd unless told otherwise.
const DefaultPrefix = "/fenec/"

// EtcdDirectory is a Directory over an etcd cluster, every key under one
// prefix.
type EtcdDirectory struct {
	cli    *clientv3.Client
	prefix string

	ctx    context.Context // ends at Close; stops every watch goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

var _ Directory = (*EtcdDirectory)(nil)

// ParseEndpoints splits a --directory value ("http://a:2379,http://b:2379")
// into endpoints.
func ParseEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// EtcdOption adjusts how OpenEtcd connects.
type EtcdOption func(*clientv3.Config)

// WithTLS has the client speak TLS with cfg to endpoints named https://:
// the servers verified against cfg's roots, cfg's certificate shown to
// servers that ask for one.
func WithTLS(cfg *tls.Config) EtcdOption {
	return func(c *clientv3.Config) { c.TLS = cfg }
}

// OpenEtcd connects to the etcd cluster at endpoints and returns the
// directory under prefix (DefaultPrefix when empty; a trailing "/" is
// added when missing). It reads once within ctx
// to check that the cluster answers. Close releases the connection.
func OpenEtcd(ctx context.Context, endpoints []string, prefix string, opts ...EtcdOption) (*EtcdDirectory, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("open etcd directory: no endpoints: %w", ErrInvalidKey)
	}
	cc := clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	}
	for _, o := range opts {
		o(&cc)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("open etcd directory: %w", authError(err))
	}
	d := newEtcd(cli, prefix)
	if _, err := cli.Get(ctx, d.prefix, clientv3.WithCountOnly(), clientv3.WithPrefix()); err != nil {
		d.Close()
		return nil, fmt.Errorf("open etcd directory: %w", authError(mapEtcdErr(err)))
	}
	return d, nil
}

func newEtcd(cli *clientv3.Client, prefix string) *EtcdDirectory {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/" // "/fenec" must not take in "/fenec2/..."
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &EtcdDirectory{cli: cli, prefix: prefix, ctx: ctx, cancel: cancel}
}

// Prefix returns the prefix every key lives under.
func (d *EtcdDirectory) Prefix() string { return d.prefix }

// Get implements Directory.
func (d *EtcdDirectory) Get(ctx context.Context, key string) (KV, error) {
	if key == "" {
		return KV{}, ErrInvalidKey
	}
	if err := d.check(); err != nil {
		return KV{}, err
	}
	resp, err := d.cli.Get(ctx, d.prefix+key)
	if err != nil {
		return KV{}, fmt.Errorf("get %q: %w", key, mapEtcdErr(err))
	}
	if len(resp.Kvs) == 0 {
		return KV{}, ErrNotFound
	}
	return d.kv(resp.Kvs[0]), nil
}

// List implements Directory.
func (d *EtcdDirectory) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	if err := d.check(); err != nil {
		return nil, 0, err
	}
	resp, err := d.cli.Get(ctx, d.prefix+prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, 0, fmt.Errorf("list %q: %w", prefix, mapEtcdErr(err))
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, d.kv(kv))
	}
	return out, resp.Header.Revision, nil
}

// Put implements Directory.
func (d *EtcdDirectory) Put(ctx context.Context, key string, value []byte) (int64, error) {
	if key == "" {
		return 0, ErrInvalidKey
	}
	if err := d.check(); err != nil {
		return 0, err
	}
	resp, err := d.cli.Put(ctx, d.prefix+key, string(value))
	if err != nil {
		return 0, fmt.Errorf("put %q: %w", key, mapEtcdErr(err))
	}
	return resp.Header.Revision, nil
}

// Delete implements Directory.
func (d *EtcdDirectory) Delete(ctx context.Context, key string) (int64, error) {
	if key == "" {
		return 0, ErrInvalidKey
	}
	if err := d.check(); err != nil {
		return 0, err
	}
	resp, err := d.cli.Delete(ctx, d.prefix+key)
	if err != nil {
		return 0, fmt.Errorf("delete %q: %w", key, mapEtcdErr(err))
	}
	return resp.Header.Revision, nil
}

// Txn implements Directory as one etcd transaction: If(every mod revision
// compare).Then(ops).
func (d *EtcdDirectory) Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error) {
	if err := checkTxn(conds, ops); err != nil {
		return 0, err
	}
	if err := d.check(); err != nil {
		return 0, err
	}
	cmps := make([]clientv3.Cmp, 0, len(conds))
	for _, c := range conds {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(d.prefix+c.Key), "=", c.ModRev))
	}
	then := make([]clientv3.Op, 0, len(ops))
	for _, op := range ops {
		if op.Delete {
			then = append(then, clientv3.OpDelete(d.prefix+op.Key))
			continue
		}
		then = append(then, clientv3.OpPut(d.prefix+op.Key, string(op.Value)))
	}
	resp, err := d.cli.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		return 0, fmt.Errorf("transaction: %w", mapEtcdErr(err))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("transaction at %d: %w", resp.Header.Revision, ErrConflict)
	}
	return resp.Header.Revision, nil
}

// Compact implements Directory.
func (d *EtcdDirectory) Compact(ctx context.Context, rev int64) error {
	if err := d.check(); err != nil {
		return err
	}
	if _, err := d.cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compact %d: %w", rev, mapEtcdErr(err))
	}
	return nil
}

// Watch implements Directory. The watch requires a leader: a member cut off
// from its cluster ends the watch with an error rather than going silent.
func (d *EtcdDirectory) Watch(ctx context.Context, prefix string, after int64) (<-chan WatchResponse, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(d.ctx, cancel)
	wch := d.cli.Watch(wctx, d.prefix+prefix, clientv3.WithPrefix(), clientv3.WithRev(after+1))
	out := make(chan WatchResponse)
	d.wg.Go(func() {
		defer close(out)
		defer stop()
		defer cancel()
		d.runWatch(wctx, wch, out)
	})
	return out, nil
}

// runWatch translates etcd's watch responses until the watch or ctx ends.
func (d *EtcdDirectory) runWatch(ctx context.Context, wch clientv3.WatchChan, out chan<- WatchResponse) {
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-wch:
		case <-ctx.Done():
			return
		}
		if !ok {
			if ctx.Err() == nil {
				sendWatch(ctx, out, WatchResponse{Err: fmt.Errorf("watch: %w", ErrClosed)})
			}
			return
		}
		if err := wr.Err(); err != nil {
			if wr.CompactRevision != 0 {
				err = fmt.Errorf("watch: compacted at %d: %w", wr.CompactRevision, ErrCompacted)
			} else {
				err = fmt.Errorf("watch: %w", mapEtcdErr(err))
			}
			sendWatch(ctx, out, WatchResponse{Err: err, Revision: wr.Header.Revision})
			return
		}
		if len(wr.Events) == 0 {
			continue
		}
		resp := WatchResponse{Revision: wr.Header.Revision, Events: make([]Event, 0, len(wr.Events))}
		for _, ev := range wr.Events {
			e := Event{Type: EventPut, KV: d.kv(ev.Kv)}
			if ev.Type == mvccpb.DELETE {
				e.Type = EventDelete
				e.KV.Value = nil
			}
			resp.Events = append(resp.Events, e)
		}
		if !sendWatch(ctx, out, resp) {
			return
		}
	}
}

func sendWatch(ctx context.Context, out chan<- WatchResponse, r WatchResponse) bool {
	select {
	case out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// Close implements Directory: it ends every watch, waits for their
// goroutines and closes the etcd client.
func (d *EtcdDirectory) Close() error {
	var err error
	d.once.Do(func() {
		d.cancel()
		d.wg.Wait()
		err = d.cli.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	})
	return err
}

func (d *EtcdDirectory) check() error {
	if d.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

func (d *EtcdDirectory) kv(kv *mvccpb.KeyValue) KV {
	return KV{
		Key:    strings.TrimPrefix(string(kv.Key), d.prefix),
		Value:  kv.Value,
		ModRev: kv.ModRevision,
	}
}

// mapEtcdErr turns etcd's errors that callers act on into this package's.
func mapEtcdErr(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: %w", ErrCompacted, err)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return fmt.Errorf("%w: %w", ErrFutureRevision, err)
	}
	return authError(err)
}
