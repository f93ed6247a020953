package global

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/fenec-go/fenec/internal/testkit"
)

func startMember(t testing.TB, cfg EmbedConfig) *Embedded {
	t.Helper()
	m, err := StartEmbedded(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func waitReady(t testing.TB, ms ...*Embedded) {
	t.Helper()
	for _, m := range ms {
		if err := m.WaitReady(testCtx(t)); err != nil {
			t.Fatalf("member %s: %v", m.Name(), err)
		}
	}
}

func TestEmbeddedStartClose(t *testing.T) {
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL, cfg.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m := startMember(t, cfg)
	waitReady(t, m)
	if u := m.ClientURLs()[0]; u == cfg.ClientURL {
		t.Fatalf("client url %s still asks for port 0", u)
	}
	d, err := m.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(testCtx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	select {
	case err := <-m.Err():
		t.Fatalf("error after a clean close: %v", err)
	default:
	}
}

func TestEmbeddedConfigValidate(t *testing.T) {
	bad := []EmbedConfig{
		{},
		{Dir: "x", ClusterState: "maybe"},
		{Dir: "x", HeartbeatMS: 100},
		{Dir: "x", HeartbeatMS: 100, ElectionMS: 200},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) passed", c)
		}
	}
	if err := DefaultEmbedConfig("x").Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL, cfg.PeerURL = "http://127.0.0.1:0", "http://127.0.0.1:0"
	m := startMember(t, cfg)
	waitReady(t, m)
	d, err := m.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(d)
	v := placeT1(t, s)
	d.Close()
	m.Close()

	// Same Dir, new ports: a single member needs no peer to agree.
	m2 := startMember(t, cfg)
	waitReady(t, m2)
	d2, err := m2.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	got, err := NewStore(d2).GetTenant(testCtx(t), "t1")
	if err != nil || got != v {
		t.Fatalf("after restart t1 = %+v (%v), want %+v", got, err, v)
	}
}

// cluster3 starts three members founding one cluster.
func cluster3(t testing.TB) ([]EmbedConfig, []*Embedded) {
	t.Helper()
	return startCluster(t, 3)
}

// startCluster starts n members founding one cluster.
func startCluster(t testing.TB, n int) ([]EmbedConfig, []*Embedded) {
	t.Helper()
	peers := map[string]string{}
	var cfgs []EmbedConfig
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		peer, err := FreeLocalURL()
		if err != nil {
			t.Fatal(err)
		}
		client, err := FreeLocalURL()
		if err != nil {
			t.Fatal(err)
		}
		peers[name] = peer
		cfgs = append(cfgs, EmbedConfig{Dir: t.TempDir(), Name: name, ClientURL: client, PeerURL: peer,
			HeartbeatMS: 50, ElectionMS: 500})
	}
	var ms []*Embedded
	for i := range cfgs {
		cfgs[i].InitialCluster = InitialCluster(peers)
		ms = append(ms, startMember(t, cfgs[i]))
	}
	waitReady(t, ms...)
	return cfgs, ms
}

func TestEmbeddedClusterSurvivesLoss(t *testing.T) {
	cfgs, ms := cluster3(t)
	var endpoints []string
	for _, m := range ms {
		endpoints = append(endpoints, m.ClientURLs()...)
	}
	ctx := testCtx(t)
	d, err := OpenEtcd(ctx, endpoints, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := NewStore(d)
	v := placeT1(t, s)
	w := startWatcher(t, d)

	// Lose the member that leads raft, the hardest one to lose.
	lost := -1
	for i, m := range ms {
		if m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			lost = i
		}
	}
	if lost < 0 {
		t.Fatal("no member leads")
	}
	ms[lost].Close()

	// The two left elect a leader and take the failover transaction.
	var failed Versioned[Tenant]
	testkit.Eventually(t, testTimeout, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		failed, err = s.Failover(cctx, "t1", v, "n2", 3)
		return err
	})
	if err := w.WaitRev(ctx, failed.Rev); err != nil {
		t.Fatal(err)
	}
	if tn, _, _ := w.Lookup("t1"); tn != failed.Value {
		t.Fatalf("watcher after the loss: %+v, want %+v", tn, failed.Value)
	}

	left := []int{}
	for i := range ms {
		if i != lost {
			left = append(left, i)
		}
	}
	// Quorum lost: a survivor restarted alone with ForceNewCluster keeps
	// the data and takes writes (an operator's promotion).
	d.Close()
	ms[left[0]].Close()
	ms[left[1]].Close()
	cfg := cfgs[left[0]]
	cfg.ForceNewCluster = true
	m := startMember(t, cfg)
	waitReady(t, m)
	d2, err := m.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	s2 := NewStore(d2)
	got, err := s2.GetTenant(ctx, "t1")
	if err != nil || got.Value != failed.Value {
		t.Fatalf("forced member's t1: %+v (%v), want %+v", got.Value, err, failed.Value)
	}
	if _, err := s2.Promote(ctx, "r2"); err != nil {
		t.Fatalf("write on the forced member: %v", err)
	}
}

func TestEmbeddedStartRefused(t *testing.T) {
	// A member with a bad config, or asked after its context ended, does
	// not start.
	if _, err := StartEmbedded(testCtx(t), EmbedConfig{}); !errors.Is(err, ErrEmbedded) {
		t.Fatalf("no dir: err %v, want ErrEmbedded", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := StartEmbedded(ctx, DefaultEmbedConfig(t.TempDir())); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled start: err %v", err)
	}
}

func TestEmbedConfigFlags(t *testing.T) {
	cfg := DefaultEmbedConfig("")
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	cfg.AddFlags(fs)
	err := fs.Parse([]string{"--etcd-dir", "/d", "--etcd-name", "r1", "--etcd-client-url", "http://127.0.0.1:1",
		"--etcd-peer-url", "http://127.0.0.1:2", "--etcd-initial-cluster", "r1=http://127.0.0.1:2",
		"--etcd-cluster-state", "existing", "--etcd-force-new-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultEmbedConfig("/d")
	want.Name, want.ClientURL, want.PeerURL = "r1", "http://127.0.0.1:1", "http://127.0.0.1:2"
	want.InitialCluster, want.ClusterState, want.ForceNewCluster = "r1=http://127.0.0.1:2", ClusterExisting, true
	if cfg != want {
		t.Fatalf("parsed %+v, want %+v", cfg, want)
	}
}

// A member removed from its cluster stops on its own and says so on Err.
func TestEmbeddedRemovedMemberReports(t *testing.T) {
	_, ms := startCluster(t, 2)
	ctx := testCtx(t)
	d, err := ms[0].Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	// etcd refuses to remove a member until the cluster has been healthy
	// for a few seconds.
	testkit.Eventually(t, testTimeout, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := d.cli.MemberRemove(cctx, uint64(ms[1].etcd.Server.MemberID()))
		return err
	})
	select {
	case err := <-ms[1].Err():
		if !errors.Is(err, ErrEmbedded) {
			t.Fatalf("removed member's error %v, want ErrEmbedded", err)
		}
	case <-ctx.Done():
		t.Fatal("removed member reported nothing")
	}
	// The member left serves alone.
	testkit.Eventually(t, testTimeout, func() error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := d.Put(cctx, "k", []byte("v"))
		return err
	})
	select {
	case err := <-ms[0].Err():
		t.Fatalf("remaining member reported %v", err)
	default:
	}
}

// A member whose cluster never forms is not ready, and still closes.
func TestEmbeddedNoQuorumCloses(t *testing.T) {
	peer, err := FreeLocalURL()
	if err != nil {
		t.Fatal(err)
	}
	absent, err := FreeLocalURL()
	if err != nil {
		t.Fatal(err)
	}
	cfg := EmbedConfig{Dir: t.TempDir(), Name: "a", ClientURL: "http://127.0.0.1:0", PeerURL: peer,
		InitialCluster: InitialCluster(map[string]string{"a": peer, "b": absent})}
	m := startMember(t, cfg)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	if err := m.WaitReady(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("member without quorum: WaitReady %v, want a deadline", err)
	}
	select {
	case <-m.Ready():
		t.Fatal("member without quorum ready")
	default:
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEmbeddedAdvertisesAName: a member given URLs to tell that name its
// host, and addresses to listen at, listens at the addresses and tells the
// names (etcd binds only to addresses, "localhost" aside, so a member in a
// container is told to listen on 0.0.0.0 and to tell its host's name).
func TestEmbeddedAdvertisesAName(t *testing.T) {
	cu, err := FreeLocalURL()
	if err != nil {
		t.Fatal(err)
	}
	pu, err := FreeLocalURL()
	if err != nil {
		t.Fatal(err)
	}
	named := func(u string) string { return "http://localhost:" + u[len("http://127.0.0.1:"):] }
	cfg := DefaultEmbedConfig(t.TempDir())
	cfg.ClientURL, cfg.PeerURL = named(cu), named(pu)
	cfg.ListenClientURL, cfg.ListenPeerURL = cu, pu
	m := startMember(t, cfg)
	waitReady(t, m)
	if got := m.ClientURLs()[0]; got != named(cu) || m.PeerURL() != named(pu) {
		t.Fatalf("tells %s and %s", got, m.PeerURL())
	}
	d, err := m.Open(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Put(testCtx(t), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A client of the address it listens at reaches it too.
	d2, err := OpenEtcd(testCtx(t), []string{cu}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if kv, err := d2.Get(testCtx(t), "k"); err != nil || string(kv.Value) != "v" {
		t.Fatalf("read through %s: %v %v", cu, kv, err)
	}
}
