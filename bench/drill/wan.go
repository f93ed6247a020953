package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The wide-area link between the deployment's regions (-wan): every
// container's traffic to a container of another region is held the delay
// each way, its traffic within its region not at all. The global tier's
// routers are each in a region: g1 in eu, g2 in us, g3 in ap. It is
// applied from the host into each container's network namespace (nsenter
// -t PID -n; the images are FROM scratch, with no tc of their own):
//
//   - netem, where the kernel has it: a prio qdisc on eth0 whose fourth
//     band is a netem delay, and u32 filters sending the packets for the
//     other regions' addresses there;
//   - proxy, where it has not: an iptables REDIRECT of the container's new
//     connections to the other regions' addresses to a wanproxy
//     (bench/drill/wanproxy) running in its namespace, which holds every
//     chunk the delay each way and a new connection a round trip, then
//     the sockets the container held already to those addresses closed
//     (ss -K), so that its processes connect again, through the proxy.
var serviceRegion = map[string]string{
	"g1": "eu", "eu1": "eu", "eu2": "eu", "eu3": "eu", "n1": "eu", "n2": "eu", "n3": "eu",
	"g2": "us", "us1": "us", "us2": "us", "us3": "us", "n4": "us", "n5": "us",
	"g3": "ap", "ap1": "ap", "ap2": "ap", "ap3": "ap", "n6": "ap", "n7": "ap",
}

const (
	wanProxyPort = "17999"
	wanMark      = "0x7e" // the proxy's own dials, which the redirect leaves alone
)

// wan is the delay applied to one deployment.
type wan struct {
	delay time.Duration
	mode  string      // netem or proxy
	procs []*exec.Cmd // the proxies, one a container (proxy mode)
	rules []redirect  // the redirects, taken off at stop
	ipt   string      // the iptables the namespaces' rules are written with
}

// redirect is the REDIRECT rules in one container's namespace, written
// with ipt (iptables-legacy or iptables-nft) in one call of its -restore.
type redirect struct {
	pid, ipt string
	far      []string
}

// apply adds (op -A) or deletes (op -D) the rules.
func (r redirect) apply(ctx context.Context, op string) error {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, ip := range r.far {
		fmt.Fprintf(&b, "%s OUTPUT -p tcp -d %s/32 -m mark ! --mark %s -j REDIRECT --to-ports %s\n", op, ip, wanMark, wanProxyPort)
	}
	b.WriteString("COMMIT\n")
	return nsenterIn(ctx, r.pid, b.String(), r.ipt+"-restore", "-w", "--noflush")
}

// applyWAN puts the delay between d's regions. mode is netem, proxy or
// auto (netem if the kernel has it, else proxy); proxyBin is the
// wanproxy's binary (deploy/build.sh builds it). stop undoes what it
// started.
func applyWAN(ctx context.Context, d *deployment, delay time.Duration, mode, proxyBin string) (*wan, error) {
	w := &wan{delay: delay, mode: mode}
	pids := map[string]string{}
	svcs := make([]string, 0, len(serviceRegion))
	for svc := range serviceRegion {
		svcs = append(svcs, svc)
	}
	slices.Sort(svcs)
	for _, svc := range svcs {
		pid := d.pids[svc]
		if pid == "" || pid == "0" {
			return nil, fmt.Errorf("service %s has no process running", svc)
		}
		pids[svc] = pid
	}
	if mode == "auto" {
		w.mode = "proxy"
		if err := netem(ctx, pids[svcs[0]], delay, nil); err == nil {
			w.mode = "netem"
		}
	}
	if w.mode == "proxy" {
		if _, err := os.Stat(proxyBin); err != nil {
			return nil, fmt.Errorf("the wide-area link's proxy (deploy/build.sh builds it): %w", err)
		}
	}
	for _, svc := range svcs {
		far := w.farIPs(d, svc)
		var err error
		if w.mode == "netem" {
			err = netem(ctx, pids[svc], delay, far)
		} else {
			err = w.proxy(ctx, pids[svc], far, proxyBin)
		}
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("the wide-area link on %s (%s): %w", svc, w.mode, err)
		}
	}
	if w.mode == "proxy" {
		// Every redirect in place: close what was connected before it.
		for _, svc := range svcs {
			if err := killSockets(ctx, pids[svc], w.farIPs(d, svc)); err != nil {
				w.stop()
				return nil, fmt.Errorf("the wide-area link on %s: %w", svc, err)
			}
		}
	}
	return w, nil
}

// farIPs are the addresses of the services of regions other than svc's.
func (w *wan) farIPs(d *deployment, svc string) []string {
	var out []string
	for other, r := range serviceRegion {
		if r != serviceRegion[svc] && d.ips[other] != "" {
			out = append(out, d.ips[other])
		}
	}
	slices.Sort(out)
	return out
}

// nsenter runs a host command in the network namespace of pid.
func nsenter(ctx context.Context, pid string, args ...string) error {
	return nsenterIn(ctx, pid, "", args...)
}

// nsenterIn is nsenter with stdin given.
func nsenterIn(ctx context.Context, pid, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", pid, "-n", "--"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("nsenter -t %s -n %s: %w: %s", pid, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netem puts the delay on eth0 of pid's namespace for packets to far (with
// far nil, it only sees whether the kernel takes the qdiscs, and takes
// them off again).
func netem(ctx context.Context, pid string, delay time.Duration, far []string) error {
	prio := []string{"tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "prio", "bands", "4",
		"priomap", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0"}
	if err := nsenter(ctx, pid, prio...); err != nil {
		return err
	}
	if err := nsenter(ctx, pid, "tc", "qdisc", "replace", "dev", "eth0", "parent", "1:4", "handle", "40:",
		"netem", "delay", fmt.Sprintf("%dus", delay.Microseconds()), "limit", "100000"); err != nil {
		_ = nsenter(ctx, pid, "tc", "qdisc", "del", "dev", "eth0", "root")
		return err
	}
	if far == nil {
		return nsenter(ctx, pid, "tc", "qdisc", "del", "dev", "eth0", "root")
	}
	var batch strings.Builder
	for _, ip := range far {
		fmt.Fprintf(&batch, "filter add dev eth0 parent 1:0 protocol ip prio 1 u32 match ip dst %s/32 flowid 1:4\n", ip)
	}
	return nsenterIn(ctx, pid, batch.String(), "tc", "-batch", "-")
}

// proxy redirects pid's new connections to far to a wanproxy started in
// its namespace.
func (w *wan) proxy(ctx context.Context, pid string, far []string, bin string) error {
	if w.ipt == "" {
		ipt, err := iptablesFor(ctx, pid)
		if err != nil {
			return err
		}
		w.ipt = ipt
	}
	cmd := exec.Command("nsenter", "-t", pid, "-n", "--", bin, "-listen", "127.0.0.1:"+wanProxyPort,
		"-delay", w.delay.String(), "-mark", wanMark)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.procs = append(w.procs, cmd)
	r := redirect{pid: pid, ipt: w.ipt, far: far}
	if err := r.apply(ctx, "-A"); err != nil {
		return err
	}
	w.rules = append(w.rules, r)
	return nil
}

// iptablesFor is the iptables Docker wrote the namespace's rules with
// (its DNS redirect), so that the drill's rules sit in the same tables.
func iptablesFor(ctx context.Context, pid string) (string, error) {
	for _, ipt := range []string{"iptables-legacy", "iptables-nft"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, "nsenter", "-t", pid, "-n", "--", ipt, "-w", "-t", "nat", "-S").CombinedOutput()
		if err == nil && strings.Contains(string(out), "DOCKER_OUTPUT") {
			return ipt, nil
		}
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return "", errors.New("no iptables on the host")
	}
	return "iptables", nil
}

// killSockets closes pid's sockets connected to far.
func killSockets(ctx context.Context, pid string, far []string) error {
	if len(far) == 0 {
		return nil
	}
	filter := []string{"("}
	for i, ip := range far {
		if i > 0 {
			filter = append(filter, "or")
		}
		filter = append(filter, "dst", ip)
	}
	filter = append(filter, ")")
	return nsenter(ctx, pid, append([]string{"ss", "-K", "-t"}, filter...)...)
}

// stop takes the redirects off and the proxies down, so that the
// containers connect straight again. (Qdiscs stay: they go with the
// containers' namespaces.)
func (w *wan) stop() {
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range w.rules {
		_ = r.apply(ctx, "-D") // a container gone took its rules with it
	}
	w.rules = nil
	for _, p := range w.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range w.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	w.procs = nil
}

// wanTimes is the link as measured: a health check from us1 of eu1 (across
// the link) and of us2 (within us), each the median of five, the
// container's own fenec timed from the host.
type wanTimes struct{ far, near time.Duration }

func measureWAN(ctx context.Context, d *deployment) (wanTimes, error) {
	id, err := d.container(ctx, "us1")
	if err != nil {
		return wanTimes{}, err
	}
	probe := func(target string) (time.Duration, error) {
		start := time.Now()
		_, err := docker(ctx, "exec", id, "/usr/local/bin/fenec", "health", "--quiet", "--tls-ca=/run/secrets/ca", d.url(target))
		return time.Since(start), err
	}
	var far, near []time.Duration
	for range 5 {
		f, err := probe("eu1")
		if err != nil {
			return wanTimes{}, err
		}
		n, err := probe("us2")
		if err != nil {
			return wanTimes{}, err
		}
		far, near = append(far, f), append(near, n)
	}
	slices.Sort(far)
	slices.Sort(near)
	return wanTimes{far: far[2], near: near[2]}, nil
}

// holdWAN is -wan-hold: the link put on a compose project already up (as
// deploy/wan.sh does), measured, and held until the drill is interrupted.
func holdWAN(ctx context.Context, cfg config, d *deployment, root string) error {
	if err := d.learn(ctx); err != nil {
		return err
	}
	w, err := applyWAN(ctx, d, cfg.wan, cfg.wanMode, filepath.Join(root, "deploy", "bin", "fenec-drill-wanproxy"))
	if err != nil {
		return err
	}
	defer w.stop()
	fmt.Printf("wide-area link on project %s: %v each way between eu, us and ap (%s)\n", d.project, w.delay, w.mode)
	time.Sleep(2 * time.Second) // the processes connecting again
	t, err := measureWAN(ctx, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill: measure the link:", err)
	} else {
		fmt.Printf("fenec health from us1: of eu1 %v, of us2 %v (median of 5): the link adds %v\n", t.far.Round(time.Millisecond), t.near.Round(time.Millisecond), (t.far - t.near).Round(time.Millisecond))
	}
	if w.mode == "netem" {
		fmt.Println("the qdiscs stay until the containers are removed or restarted")
		return nil
	}
	fmt.Println("the proxies run until this is interrupted (Ctrl-C); the connections made through them break then")
	<-ctx.Done()
	return nil
}
