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
	"github.com/fenec-go/fenec/region"
)

// tlsSetup is the TLS half of the bench: a node serving HTTPS, a router
// serving HTTPS and reaching the node over TLS, and the certificates.
type tlsSetup struct {
	node   *node.Server
	router *region.Router
	client *tlsx.Source // the bench's client: the CA, and a certificate
	ca     string       // the CA bundle's path
	files  map[string]tlsx.Files
}

// startTLS issues a CA and certificates, and starts a node and a router
// over TLS, with tenant "b" placed on the node as on the plain side. The
// node's certificate names "node" besides 127.0.0.1 (nginx checks the
// name it is given).
func startTLS(dir string, log *slog.Logger) (*tlsSetup, error) {
	ca, err := tlsx.NewCA("bench CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		return nil, err
	}
	s := &tlsSetup{ca: filepath.Join(pki, "ca.pem"), files: map[string]tlsx.Files{}}
	if err := tlsx.WriteFile(s.ca, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	for _, name := range []string{"node", "router", "client"} {
		leaf, err := ca.Issue(name, []string{"127.0.0.1", name}, 24*time.Hour)
		if err != nil {
			return nil, err
		}
		f := tlsx.Files{Cert: filepath.Join(pki, name+".pem"), Key: filepath.Join(pki, name+"-key.pem"), CA: s.ca}
		if err := leaf.Write(f.Cert, f.Key); err != nil {
			return nil, err
		}
		s.files[name] = f
	}
	if s.client, err = tlsx.Load(s.files["client"], nil); err != nil {
		return nil, err
	}
	if s.node, err = benchkit.StartNode(filepath.Join(dir, "n-tls"), adminToken, log, func(c *node.Config) { c.TLS = s.files["node"] }); err != nil {
		return nil, err
	}
	if s.router, err = benchkit.StartRouter(filepath.Join(dir, "shard-tls"), log, func(c *region.Config) { c.TLS = s.files["router"] }); err != nil {
		s.node.Close()
		return nil, err
	}
	c := s.httpClient(4)
	defer c.CloseIdleConnections()
	base := "https://" + s.router.Addr()
	body := fmt.Sprintf(`{"addr":"https://%s","token":%q,"region":"bench"}`, s.node.Addr(), adminToken)
	if err := call(c, "PUT", base+"/_shard/nodes/n-tls", body, 201); err != nil {
		s.close()
		return nil, err
	}
	if err := call(c, "PUT", base+"/_shard/tenants/b", `{"node":"n-tls"}`, 201); err != nil {
		s.close()
		return nil, err
	}
	if err := call(c, "POST", base+"/t/b/query", `{"query":"create collection c (name text, n int @sorted)"}`, 200); err != nil {
		s.close()
		return nil, err
	}
	var rows []string
	for i := range 1000 {
		rows = append(rows, fmt.Sprintf(`{"name":"row %d","n":%d}`, i, i))
	}
	if err := call(c, "POST", base+"/t/b/c", "["+strings.Join(rows, ",")+"]", 201); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *tlsSetup) close() {
	s.router.Close()
	s.node.Close()
}

// httpClient is a keep-alive client over TLS showing the client's
// certificate.
func (s *tlsSetup) httpClient(idle int) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: idle, DisableCompression: true,
		DialTLSContext: s.client.Dialer(d.DialContext),
	}}
}

// tlsTargets are the node straight, the router and nginx, each over TLS
// on every link, with a keep-alive client each.
func (s *tlsSetup) targets(ng *nginxProc) []target {
	ts := []target{
		{name: "node", base: "https://" + s.node.Addr(), c: s.httpClient(1)},
		{name: "fenec-shard", base: "https://" + s.router.Addr(), c: s.httpClient(1)},
	}
	if ng != nil {
		ts = append(ts, target{name: "nginx", base: ng.base, c: s.httpClient(1)})
	}
	return ts
}

// startNginxTLS runs nginx terminating TLS with the router's certificate
// and proxying over TLS to upstream (verified against the CA as "node",
// showing a client certificate, sessions reused, connections kept).
func (s *tlsSetup) startNginx(bin, dir, upstream string) (*nginxProc, error) {
	rf := s.files["router"]
	return runNginx(bin, dir, "https://", fmt.Sprintf(`
	upstream node { server %[1]s; keepalive 16; }
	server {
		listen %%[1]s ssl;
		ssl_certificate %[2]s;
		ssl_certificate_key %[3]s;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_session_cache shared:SSL:1m;
		location / {
			proxy_pass https://node;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate %[4]s;
			proxy_ssl_name node;
			proxy_ssl_server_name on;
			proxy_ssl_certificate %[2]s;
			proxy_ssl_certificate_key %[3]s;
			proxy_ssl_session_reuse on;
			proxy_ssl_protocols TLSv1.2 TLSv1.3;
		}
	}`, upstream, rf.Cert, rf.Key, s.ca), s.httpClient(1))
}

// freshTable measures a fresh connection to addr and one read on it, for
// n connections after warmup: plain TCP to plainAddr, TLS with a full
// handshake each time, and TLS resuming the last session (the router's
// way to its nodes).
func (s *tlsSetup) freshTable(w io.Writer, plainAddr string, warmup, n int) error {
	addr := s.node.Addr()
	noResume := func() *tls.Config {
		cfg := s.client.Client(addr)
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
		{"TLS, session resumed", addr, func() *tls.Config { return s.client.Client(addr) }},
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

// tlsBench measures the router and nginx with TLS on every link beside
// the node over TLS, in the same run as the plain table (plain holds its
// p50s), then a fresh connection's cost with and without resumption.
func tlsBench(w io.Writer, cfg config, dir string, log *slog.Logger, plainNode *node.Server, plain [][]time.Duration) error {
	ts, err := startTLS(filepath.Join(dir, "tls"), log)
	if err != nil {
		return err
	}
	defer ts.close()
	ng, err := ts.startNginx(cfg.nginx, filepath.Join(dir, "nginx-tls"), ts.node.Addr())
	note := "nginx: TLS in (ssl_session_cache), TLS out to the node (verified as \"node\", client certificate, proxy_ssl_session_reuse, keepalive 16)"
	if err != nil {
		note = "nginx: not measured: " + err.Error()
		ng = nil
	} else {
		defer ng.stop()
	}
	fmt.Fprintln(w, "TLS on every link (TLS 1.3, ECDSA P-256 certificates of one CA; the client shows one, and the router shows the node its own)")
	fmt.Fprintln(w, note)
	fmt.Fprintln(w)
	tls, err := latencyTable(w, cfg, ts.targets(ng))
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	for ki, k := range kinds {
		add := func(p [][]time.Duration, via int) float64 { return us(p[ki][via] - p[ki][0]) }
		line := fmt.Sprintf("%s, p50 added to the node's: fenec-shard %.1f µs plain, %.1f µs TLS (%.2f×)", k.name,
			add(plain, 1), add(tls, 1), add(tls, 1)/add(plain, 1))
		if len(plain[ki]) > 2 && len(tls[ki]) > 2 {
			line += fmt.Sprintf("; nginx %.1f µs plain, %.1f µs TLS (%.2f×)", add(plain, 2), add(tls, 2), add(tls, 2)/add(plain, 2))
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	return ts.freshTable(w, plainNode.Addr(), cfg.warmup/5, cfg.requests/5)
}
