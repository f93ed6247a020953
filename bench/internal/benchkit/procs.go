package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The benches that measure fenec as deployed start its programs as
// processes of their own, built from this checkout by go build: what
// follows starts, waits for and stops them.

// Proc is one child process a bench started; Stop or Kill ends it.
type Proc struct {
	Name   string
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

// StartProc starts bin with args, env added to the bench's own
// environment; the kernel stops it should the bench die first
// (sysProcAttr), and Stop or Kill ends it otherwise.
func StartProc(name string, env []string, bin string, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// PID is the child's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Output is the start of what the child wrote to its stdout and stderr.
func (p *Proc) Output() string { return p.out.String() }

// Stop asks the child to end (SIGTERM), kills it after 10 s, and waits.
func (p *Proc) Stop() {
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

// Kill ends the child at once (SIGKILL: nothing of it runs after, as a
// machine lost) and waits until it is gone.
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// WaitHTTP polls url until it answers 200, the child exits, or 30 s pass.
func (p *Proc) WaitHTTP(url string) error {
	return p.WaitHTTPWith(&http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, url)
}

// WaitHTTPWith is WaitHTTP asking with hc (over TLS).
func (p *Proc) WaitHTTPWith(hc *http.Client, url string) error {
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
			return fmt.Errorf("%s exited: %s", p.Name, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer %s: %v\n%s", p.Name, url, err, p.out.String())
		}
	}
}

// FreeAddr returns a loopback address free right now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// GoBin is the go command: $GO, else go from the PATH.
func GoBin() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// BuildBinaries builds fenec-node and fenec-shard into dir; the bench
// runs from the repository's root.
func BuildBinaries(ctx context.Context, dir string) (nodeBin, shardBin string, err error) {
	cmd := exec.CommandContext(ctx, GoBin(), "build", "-o", dir+string(filepath.Separator), "./cmd/fenec-node", "./cmd/fenec-shard")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go build (run the bench from the repository's root): %w\n%s", err, out.String())
	}
	return filepath.Join(dir, "fenec-node"), filepath.Join(dir, "fenec-shard"), nil
}

// BuildTemp is BuildBinaries into a temporary directory named for the
// bench; remove deletes it.
func BuildTemp(bench string) (nodeBin, shardBin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "fenec-"+bench+"-bin-")
	if err != nil {
		return "", "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if nodeBin, shardBin, err = BuildBinaries(context.Background(), dir); err != nil {
		remove()
		return "", "", nil, err
	}
	return nodeBin, shardBin, remove, nil
}

// StartNodeProc starts fenec-node over the directory dir on a free
// loopback address with adminToken (extra: more flags) and waits for it
// to answer; it returns that address.
func StartNodeProc(bin, dir, name, adminToken string, extra ...string) (*Proc, string, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := StartProc(name, nil, bin, append([]string{"--dir", dir, "--http", addr, "--admin-token", adminToken}, extra...)...)
	if err != nil {
		return nil, "", err
	}
	if err := p.WaitHTTP("http://" + addr + "/_health"); err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, addr, nil
}

// RouterProc is a fenec-shard process over an embedded etcd member.
type RouterProc struct {
	P    *Proc
	URL  string // where it listens
	Etcd string // its etcd member's client URL (standbys read the directory there)
	// Secrets are the flags that give another router the directory's key
	// and password: the files the router made in its etcd member's data
	// dir as it founded the directory (or was given in extra).
	Secrets []string
}

// StartRouterProc starts fenec-shard with id and its etcd member's data
// under dir, on free loopback addresses (extra: more flags), and waits
// for it to answer.
func StartRouterProc(bin, dir, id string, extra ...string) (RouterProc, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := FreeAddr()
		if err != nil {
			return RouterProc{}, err
		}
		addrs[i] = a
	}
	args := append([]string{"--listen", addrs[0], "--id", id, "--etcd-dir", filepath.Join(dir, "etcd"),
		"--etcd-client-url", "http://" + addrs[1], "--etcd-peer-url", "http://" + addrs[2]}, extra...)
	p, err := StartProc("fenec-shard", nil, bin, args...)
	if err != nil {
		return RouterProc{}, err
	}
	if err := p.WaitHTTP("http://" + addrs[0] + "/_health"); err != nil {
		p.Stop()
		return RouterProc{}, err
	}
	secrets := []string{"--directory-key-file", filepath.Join(dir, "etcd", "directory.key"), "--directory-password-file", filepath.Join(dir, "etcd", "directory.password")}
	for i := 0; i+1 < len(extra); i++ {
		switch extra[i] {
		case "--directory-key-file":
			secrets[1] = extra[i+1]
		case "--directory-password-file":
			secrets[3] = extra[i+1]
		}
	}
	return RouterProc{P: p, URL: "http://" + addrs[0], Etcd: "http://" + addrs[1], Secrets: secrets}, nil
}
