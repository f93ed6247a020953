package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
	"github.com/fenec-go/fenec/internal/tlsx"
	"github.com/fenec-go/fenec/node"
)

// The TLS half of the bench: the same node, router and nginx, each a
// process, with TLS on every link — wrk to the router or nginx, the
// router or nginx to the node (verified against the bench's CA, showing a
// certificate of their own) — measured in the same rounds as the plain
// targets; and, in process, what a fresh connection to a node costs with
// a full handshake against a resumed session.

// benchPKI is the bench's CA bundle and the certificates it issued.
type benchPKI struct {
	ca    string
	files map[string]tlsx.Files
}

// issueCerts makes a CA in dir and a certificate for each name, valid for
// 127.0.0.1 and the name (nginx checks the node as "node").
func issueCerts(dir string, names ...string) (*benchPKI, error) {
	ca, err := tlsx.NewCA("bench CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := &benchPKI{ca: filepath.Join(dir, "ca.pem"), files: map[string]tlsx.Files{}}
	if err := tlsx.WriteFile(p.ca, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	for _, name := range names {
		leaf, err := ca.Issue(name, []string{"127.0.0.1", name}, 24*time.Hour)
		if err != nil {
			return nil, err
		}
		f := tlsx.Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: p.ca}
		if err := leaf.Write(f.Cert, f.Key); err != nil {
			return nil, err
		}
		p.files[name] = f
	}
	return p, nil
}

// tlsArgs are a process's TLS flags for name's certificate.
func (p *benchPKI) tlsArgs(name string) []string {
	f := p.files[name]
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
}

// client is an HTTP client verifying against the CA and showing name's
// certificate.
func (p *benchPKI) client(name string, timeout time.Duration) (*http.Client, error) {
	src, err := tlsx.Load(p.files[name], nil)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialTLSContext: src.Dialer(d.DialContext)}}, nil
}

// startTLS adds the TLS targets to d: a node serving HTTPS, a router
// serving HTTPS that reaches it at https:// (the node placed and filled
// as the plain one), and nginx with one worker terminating TLS and
// proxying to the node over TLS. Their "+" columns are against the node
// over TLS.
func (d *deployedRig) startTLS(nodeBin, shardBin, nginxBin string) error {
	pki, err := issueCerts(filepath.Join(d.dir, "pki"), "node", "router", "nginx", "bench")
	if err != nil {
		return err
	}
	hc, err := pki.client("bench", 30*time.Second)
	if err != nil {
		return err
	}
	nodeAddr, err := benchkit.FreeAddr()
	if err != nil {
		return err
	}
	n, err := benchkit.StartProc("fenec-node TLS", nil, nodeBin, append([]string{"--dir", filepath.Join(d.dir, "node-tls"), "--http", nodeAddr,
		"--admin-token", adminToken}, pki.tlsArgs("node")...)...)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, n)
	if err := n.WaitHTTPWith(hc, "https://"+nodeAddr+"/_health"); err != nil {
		return err
	}
	addrs := make([]string, 3) // listen, etcd client, etcd peer
	for i := range addrs {
		if addrs[i], err = benchkit.FreeAddr(); err != nil {
			return err
		}
	}
	r, err := benchkit.StartProc("fenec-shard TLS", nil, shardBin, append([]string{"--listen", addrs[0], "--id", "bench-tls",
		"--etcd-dir", filepath.Join(d.dir, "etcd-tls"), "--etcd-client-url", "http://" + addrs[1], "--etcd-peer-url", "http://" + addrs[2]},
		pki.tlsArgs("router")...)...)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, r)
	if err := r.WaitHTTPWith(hc, "https://"+addrs[0]+"/_health"); err != nil {
		return err
	}
	if err := fillDeployedWith(hc, "https://"+addrs[0], "https://"+nodeAddr); err != nil {
		return err
	}
	ref := len(d.targets)
	d.targets = append(d.targets,
		wtarget{name: "node TLS", base: "https://" + nodeAddr, pids: []int{n.PID()}, ref: ref},
		wtarget{name: "fenec-shard TLS", base: "https://" + addrs[0], pids: []int{r.PID()}, ref: ref})
	if nginxBin == "none" {
		return nil
	}
	listen, err := benchkit.FreeAddr()
	if err != nil {
		return err
	}
	dir := filepath.Join(d.dir, "nginx-tls")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	cf, nf := filepath.Join(dir, "nginx.conf"), pki.files["nginx"]
	if err := os.WriteFile(cf, []byte(benchkit.NginxConf(dir, nodeAddr, listen, "1", &nf)), 0o644); err != nil {
		return err
	}
	path, err := exec.LookPath(nginxBin)
	if err != nil {
		return err
	}
	ng, err := benchkit.StartProc("nginx TLS", nil, path, "-e", filepath.Join(dir, "logs", "error.log"), "-p", dir, "-c", cf)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, ng)
	if err := ng.WaitHTTPWith(hc, "https://"+listen+"/_health"); err != nil {
		return err
	}
	d.targets = append(d.targets, wtarget{name: "nginx TLS 1 worker", base: "https://" + listen, pids: append([]int{ng.PID()}, childPIDs(ng.PID())...), ref: ref})
	d.tlsNote = "TLS: TLS 1.3, ECDSA P-256 certificates of one CA; wrk (OpenSSL) to the node, the router or nginx; the router and nginx verify the node " +
		"and show it a certificate, keeping connections to it (nginx: keepalive 32, proxy_ssl_session_reuse); \"+\" of a TLS target is against the node over TLS"
	return nil
}

// tlsCompare says, per load, what the router and nginx add to a request
// straight to the node, plain and over TLS, from the deployed medians.
func tlsCompare(w io.Writer, d *deployedRig, loads []wrkLoad, plus func(li, ti int) float64) {
	find := func(name string) int {
		for i, t := range d.targets {
			if t.name == name {
				return i
			}
		}
		return -1
	}
	shard, shardTLS := find("fenec-shard"), find("fenec-shard TLS")
	ng, ngTLS := find("nginx 1 worker"), find("nginx TLS 1 worker")
	if shardTLS < 0 {
		return
	}
	fmt.Fprintln(w)
	for li, l := range loads {
		line := fmt.Sprintf("%s at %d: p50 added to the node's: fenec-shard %+.0f µs plain, %+.0f µs over TLS", l, l.conns, plus(li, shard), plus(li, shardTLS))
		if ng >= 0 && ngTLS >= 0 {
			line += fmt.Sprintf("; nginx 1 worker %+.0f µs plain, %+.0f µs over TLS", plus(li, ng), plus(li, ngTLS))
		}
		fmt.Fprintln(w, line)
	}
}

// freshBench starts a node over TLS in process, with tenant "b" as the
// plain node holds it, and measures a fresh connection's cost to each.
func freshBench(w io.Writer, cfg config, dir string, log *slog.Logger, plainNode *node.Server) error {
	pki, err := issueCerts(filepath.Join(dir, "pki-fresh"), "node", "bench")
	if err != nil {
		return err
	}
	n, err := benchkit.StartNode(filepath.Join(dir, "n-fresh"), adminToken, log, func(c *node.Config) { c.TLS = pki.files["node"] })
	if err != nil {
		return err
	}
	defer n.Close()
	hc, err := pki.client("bench", 30*time.Second)
	if err != nil {
		return err
	}
	base := "https://" + n.Addr()
	req, _ := http.NewRequest("PUT", base+"/_admin/tenants/b", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if err := call(hc, "POST", base+"/t/b/query", `{"query":"create collection c (name text, n int @sorted)"}`, 200); err != nil {
		return err
	}
	if err := call(hc, "POST", base+"/t/b/c", `{"name":"row 0","n":0}`, 201); err != nil {
		return err
	}
	src, err := tlsx.Load(pki.files["bench"], nil)
	if err != nil {
		return err
	}
	return freshTable(w, src, n.Addr(), plainNode.Addr(), cfg.warmup/5, cfg.requests/5)
}

// freshTable measures a fresh connection to addr and one read on it, for
// n connections after warmup: plain TCP to plainAddr, TLS with a full
// handshake each time, and TLS resuming the last session (the router's
// way to its nodes).
func freshTable(w io.Writer, client *tlsx.Source, addr, plainAddr string, warmup, n int) error {
	noResume := func() *tls.Config {
		cfg := client.Client(addr)
		cfg.ClientSessionCache = nil
		return cfg
	}
	kinds := []struct {
		name string
		addr string
		cfg  func() *tls.Config
	}{
		{"plain TCP", plainAddr, nil},
		{"TLS, full handshake", addr, noResume},
		{"TLS, session resumed", addr, func() *tls.Config { return client.Client(addr) }},
	}
	lat := make([][]time.Duration, len(kinds))
	resumed := make([]int, len(kinds))
	for _, k := range kinds {
		for range warmup {
			if _, _, err := freshRead(k.addr, k.cfg); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
		}
	}
	for done := 0; done < n; {
		step := min(200, n-done)
		for ki, k := range kinds {
			for range step {
				d, res, err := freshRead(k.addr, k.cfg)
				if err != nil {
					return fmt.Errorf("%s: %w", k.name, err)
				}
				lat[ki] = append(lat[ki], d)
				if res {
					resumed[ki]++
				}
			}
		}
		done += step
	}
	fmt.Fprintf(w, "a fresh connection to the node and one read on it (dial, handshake, request, answer), %d each after %d of warm-up, in turns of 200\n", n, warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "connection\tresumed\tp50 µs\tp95 µs\tp99 µs\tp50 ×plain\tp99 ×plain\t")
	base := percentiles(lat[0])
	for ki, k := range kinds {
		p := percentiles(lat[ki])
		fmt.Fprintf(tw, "%s\t%d/%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t\n", k.name, resumed[ki], n,
			us(p[0]), us(p[1]), us(p[2]), float64(p[0])/float64(base[0]), float64(p[2])/float64(base[2]))
	}
	return tw.Flush()
}

// freshRead dials addr (over TLS with cfg, unless nil), reads one row by
// id, and closes: the time it took and whether the session resumed.
func freshRead(addr string, cfg func() *tls.Config) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	resumed := false
	if cfg != nil {
		tc := tls.Client(c, cfg())
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, false, err
		}
		resumed = tc.ConnectionState().DidResume
		c = tc
	}
	body := `{"query":"get c where id = $1","params":[1]}`
	req := "POST /t/b/query HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		fmt.Sprint(len(body)) + "\r\n\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		return 0, false, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, false, err
	}
	if res.StatusCode != 200 {
		return 0, false, errors.New(res.Status)
	}
	return took, resumed, nil
}

// runNginx starts nginx with one worker and the http block given (its
// %[1]s the address it listens on), and waits until base/_health answers
// through hc.
func runNginx(bin, dir, scheme, servers string, hc *http.Client) (*nginxProc, error) {
	if bin == "none" {
		return nil, errors.New("skipped (-nginx none)")
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found (make shard-bench installs Debian's nginx)", bin)
	}
	ver, _ := exec.Command(path, "-v").CombinedOutput()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, fmt.Sprintf(servers, addr))
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-e", filepath.Join(dir, "logs", "error.log"), "-p", dir, "-c", cf)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ng := &nginxProc{cmd: cmd, base: scheme + addr, version: strings.TrimSpace(strings.TrimPrefix(string(ver), "nginx version: "))}
	hc.Timeout = time.Second
	defer hc.CloseIdleConnections()
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := hc.Get(ng.base + "/_health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return ng, nil
			}
		}
		if time.Now().After(deadline) {
			ng.stop()
			return nil, fmt.Errorf("nginx did not answer: %v %s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
