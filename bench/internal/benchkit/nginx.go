package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// The deployed benches set fenec's router beside nginx as a plain reverse
// proxy to the same node, each its own process: what a proxy hop costs
// anyway, against what fenec's costs.

// NginxConf is a plain reverse proxy to upstream with keep-alive
// connections to it, listening on listen, with workers worker processes
// ("1" or "auto"). With f it terminates TLS with f's certificate and
// proxies over TLS: the node verified against f's CA as "node", f's
// certificate shown to it, sessions reused, connections kept.
func NginxConf(dir, upstream, listen, workers string, f *tlsx.Files) string {
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

// StartNginx runs nginx with NginxConf in dir, plain HTTP; base is its URL.
func StartNginx(bin, dir, upstream, workers string) (p *Proc, base string, err error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, "", fmt.Errorf("%s not found (make bench-tools installs Debian's nginx)", bin)
	}
	listen, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, "", err
	}
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(NginxConf(dir, upstream, listen, workers, nil)), 0o644); err != nil {
		return nil, "", err
	}
	p, err = StartProc("nginx ("+workers+" worker)", nil, path, "-e", filepath.Join(dir, "logs", "error.log"), "-p", dir, "-c", cf)
	if err != nil {
		return nil, "", err
	}
	base = "http://" + listen
	if err := p.WaitHTTP(base + "/_health"); err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, base, nil
}

// NginxVersion is what `nginx -v` says, or why it cannot.
func NginxVersion(bin string) string {
	b, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return "nginx: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}
