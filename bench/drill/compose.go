package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/internal/tlsx"
)

// deployment is one compose project of deploy/compose.yaml, driven with
// docker-compose (or docker compose) and docker.
type deployment struct {
	project string
	file    string
	env     []string // FENEC_* settings for this run
	tokens  map[string]string
	ips     map[string]string // service → its address on the project's network
	ids     map[string]string // service → its container (learn)
	pids    map[string]string // service → its container's process on the host (learn)
	tls     *tlsx.Source      // the CA bundle and the operator's certificate
}

// compose runs docker-compose with the project's settings.
func (d *deployment) compose(ctx context.Context, args ...string) (string, error) {
	name, pre := "docker-compose", []string{}
	if _, err := exec.LookPath(name); err != nil {
		name, pre = "docker", []string{"compose"}
	}
	full := append(pre, append([]string{"-f", d.file, "-p", d.project}, args...)...)
	cmd := exec.CommandContext(ctx, name, full...)
	cmd.Env = append(os.Environ(), d.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(full, " "), err, tail(out.String(), 40))
	}
	return out.String(), nil
}

// docker runs docker.
func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// up starts the deployment (without Prometheus) and learns the services'
// addresses.
func (d *deployment) up(ctx context.Context) error {
	if _, err := d.compose(ctx, "up", "-d", "--no-build"); err != nil {
		return err
	}
	return d.learn(ctx)
}

// learn reads the containers, addresses and process ids of the
// deployment's routers and nodes, in two calls of docker (docker-compose
// ps a service at a time takes seconds each on a loaded machine).
func (d *deployment) learn(ctx context.Context) error {
	out, err := docker(ctx, "ps", "-q", "--filter", "label=com.docker.compose.project="+d.project)
	if err != nil {
		return err
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return fmt.Errorf("project %s has no container running", d.project)
	}
	out, err = docker(ctx, append([]string{"inspect", "-f",
		`{{index .Config.Labels "com.docker.compose.service"}} {{.Id}} {{.State.Pid}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}`}, ids...)...)
	if err != nil {
		return err
	}
	d.ips, d.ids, d.pids = map[string]string{}, map[string]string{}, map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		d.ids[f[0]], d.pids[f[0]], d.ips[f[0]] = f[1], f[2], f[3]
	}
	for svc := range serviceRegion {
		if d.ips[svc] == "" {
			return fmt.Errorf("service %s has no running container with an address", svc)
		}
	}
	return nil
}

// down removes the deployment, its volumes and its network.
func (d *deployment) down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := d.compose(ctx, "down", "-v", "--remove-orphans", "-t", "5")
	return err
}

// container is the id of a service's container.
func (d *deployment) container(ctx context.Context, svc string) (string, error) {
	if id, ok := d.ids[svc]; ok {
		return id, nil
	}
	out, err := d.compose(ctx, "ps", "-q", svc)
	id := strings.TrimSpace(out)
	if err == nil && id == "" {
		err = fmt.Errorf("service %s has no container", svc)
	}
	return id, err
}

// network is the project's network (its name as compose makes it).
func (d *deployment) network() string { return d.project + "_fenec" }

// url is a service's base URL (7700 for routers, 7070 for nodes), by
// its name: d.client dials it at its address.
func (d *deployment) url(svc string) string {
	port := "7700"
	if strings.HasPrefix(svc, "n") {
		port = "7070"
	}
	return "https://" + svc + ":" + port
}

// call sends one JSON request with a token and decodes a JSON answer into
// out (when set); it returns the status.
func call(ctx context.Context, hc *http.Client, method, url, token string, body, out any) (int, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 2048))
		return res.StatusCode, fmt.Errorf("%s %s: %d: %s", method, url, res.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return res.StatusCode, err
		}
	}
	return res.StatusCode, nil
}

// freePorts picks where the routers' ports are published (compose's
// FENEC_PORTS: a prefix of two digits, PP00 to PP32 and PP90): the first
// prefix from 47 on whose ports are all free, so that a drill runs beside
// another deployment on the same host. The drill itself talks to the
// containers' own addresses.
func freePorts() (string, error) {
	for prefix := 47; prefix <= 69; prefix++ {
		free := true
		for _, suffix := range []int{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 90} {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d%02d", prefix, suffix))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return strconv.Itoa(prefix), nil
		}
	}
	return "", fmt.Errorf("no free ports to publish on from 4700 to 6999")
}

// waitFor polls fn every 200 ms until it returns nil or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, fn func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not so after %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
