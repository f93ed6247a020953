package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// proc is one child process the bench started; stop ends it.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// lockedBuffer keeps a child's output for the error a failed start
// reports; written by exec's copying goroutine.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 { // keep the start of it; enough to say why
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProc starts bin with args; the kernel kills it should the bench
// die first (sysProcAttr), and stop ends it otherwise.
func startProc(name, bin string, args ...string) (*proc, error) {
	return startProcEnv(name, nil, bin, args...)
}

// startProcEnv is startProc with env added to the bench's own environment.
func startProcEnv(name string, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out := newLockedBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// pid is the child's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the child to end (SIGTERM), kills it after 10 s, and waits.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitHTTP polls url until it answers 200, the child exits, or 30 s pass.
func (p *proc) waitHTTP(url string) error {
	return p.waitHTTPWith(&http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, url)
}

// waitHTTPWith is waitHTTP asking with hc (over TLS).
func (p *proc) waitHTTPWith(hc *http.Client, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := hc.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %s", p.name, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s: %v\n%s", p.name, url, err, p.out.String())
		}
	}
}

// startNodeProc starts fenec-node over the directory dir on a free
// loopback address and waits for it to answer; it returns that address.
func startNodeProc(bin, dir, name string, extra ...string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc(name, bin, append([]string{"--dir", dir, "--http", addr, "--admin-token", adminToken}, extra...)...)
	if err != nil {
		return nil, "", err
	}
	if err := p.waitHTTP("http://" + addr + "/_health"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

// routerProc is a fenec-shard process over an embedded etcd member.
type routerProc struct {
	p    *proc
	url  string // where it listens
	etcd string // its etcd member's client URL (standbys read the directory there)
}

// startRouterProc starts fenec-shard with id and its etcd member's data
// under dir, on free loopback addresses (extra: more flags), and waits
// for it to answer.
func startRouterProc(bin, dir, id string, extra ...string) (routerProc, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return routerProc{}, err
		}
		addrs[i] = a
	}
	args := append([]string{"--listen", addrs[0], "--id", id, "--etcd-dir", filepath.Join(dir, "etcd"),
		"--etcd-client-url", "http://" + addrs[1], "--etcd-peer-url", "http://" + addrs[2]}, extra...)
	p, err := startProc("fenec-shard", bin, args...)
	if err != nil {
		return routerProc{}, err
	}
	if err := p.waitHTTP("http://" + addrs[0] + "/_health"); err != nil {
		p.stop()
		return routerProc{}, err
	}
	return routerProc{p: p, url: "http://" + addrs[0], etcd: "http://" + addrs[1]}, nil
}

// freeAddr returns a loopback address free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// buildBinaries builds fenec-node and fenec-shard into dir as a deployment
// would run them (no race detector, cgo as the Makefile sets it).
func buildBinaries(ctx context.Context, dir string) (nodeBin, shardBin string, err error) {
	cmd := exec.CommandContext(ctx, goBin(), "build", "-o", dir+string(filepath.Separator), "./cmd/fenec-node", "./cmd/fenec-shard")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go build (run the bench from the repository's root): %w\n%s", err, out.String())
	}
	return filepath.Join(dir, "fenec-node"), filepath.Join(dir, "fenec-shard"), nil
}

// nginxConf is a plain reverse proxy to upstream with keep-alive
// connections to it, listening on listen, with workers worker processes
// ("1" or "auto"). With f it terminates TLS with f's certificate and
// proxies over TLS: the node verified against f's CA as "node", f's
// certificate shown to it, sessions reused, connections kept.
func nginxConf(dir, upstream, listen, workers string, f *tlsx.Files) string {
	scheme, ssl, proxySSL := "http", "", ""
	if f != nil {
		scheme = "https"
		ssl = fmt.Sprintf(` ssl;
		ssl_certificate %[1]s;
		ssl_certificate_key %[2]s;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_session_cache shared:SSL:1m`, f.Cert, f.Key)
		proxySSL = fmt.Sprintf(`
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate %[3]s;
			proxy_ssl_name node;
			proxy_ssl_server_name on;
			proxy_ssl_certificate %[1]s;
			proxy_ssl_certificate_key %[2]s;
			proxy_ssl_session_reuse on;
			proxy_ssl_protocols TLSv1.2 TLSv1.3;`, f.Cert, f.Key, f.CA)
	}
	return fmt.Sprintf(`worker_processes %[4]s;
daemon off;
master_process on;
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
	upstream node { server %[2]s; keepalive 32; }
	server {
		listen %[3]s%[6]s;
		location / {
			proxy_pass %[5]s://node;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;%[7]s
		}
	}
}
`, dir, upstream, listen, workers, scheme, ssl, proxySSL)
}

// startNginxProc runs nginx with nginxConf in dir.
func startNginxProc(bin, dir, upstream, workers string) (p *proc, base string, err error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, "", fmt.Errorf("%s not found (make shard-bench installs Debian's nginx)", bin)
	}
	listen, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, "", err
	}
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(nginxConf(dir, upstream, listen, workers, nil)), 0o644); err != nil {
		return nil, "", err
	}
	p, err = startProc("nginx ("+workers+" worker)", path, "-e", filepath.Join(dir, "logs", "error.log"), "-p", dir, "-c", cf)
	if err != nil {
		return nil, "", err
	}
	base = "http://" + listen
	if err := p.waitHTTP(base + "/_health"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, base, nil
}

// nginxVersion is what `nginx -v` says, or why it cannot.
func nginxVersion(bin string) string {
	b, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "nginx: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}

// childPIDs lists the children of pid (nginx's workers under its master).
func childPIDs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		var n int
		if _, err := fmt.Sscan(f, &n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

var errNoWrk = errors.New("wrk not found (make shard-bench installs Debian's wrk)")
