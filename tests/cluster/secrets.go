package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
)

// Secrets are the directory's key and password files every router of a
// cluster reads (--directory-key-file, --directory-password-file), as
// every router of a deployment does: standbys, regions' routers and
// routers founding one directory together.
type Secrets struct {
	Key, Password string
}

// Secrets returns the cluster's secrets, made at the first call.
func (c *Cluster) Secrets() Secrets {
	c.tb.Helper()
	s := Secrets{Key: filepath.Join(c.dir, "secrets", "directory.key"), Password: filepath.Join(c.dir, "secrets", "directory.password")}
	if _, err := os.Stat(s.Key); err == nil {
		return s
	}
	if err := os.MkdirAll(filepath.Dir(s.Key), 0o700); err != nil {
		c.tb.Fatal(err)
	}
	for _, path := range []string{s.Key, s.Password} {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			c.tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(b[:])+"\n"), 0o600); err != nil {
			c.tb.Fatal(err)
		}
	}
	return s
}

// DirectoryPassword is the password of the cluster's directories, for a
// test reaching one itself (global.WithPassword).
func (c *Cluster) DirectoryPassword() string {
	c.tb.Helper()
	b, err := os.ReadFile(c.Secrets().Password)
	if err != nil {
		c.tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// secretArgs are the flags giving a router the cluster's secrets.
func (c *Cluster) secretArgs() []string {
	s := c.Secrets()
	return []string{"--directory-key-file", s.Key, "--directory-password-file", s.Password}
}

// DirectoryPassword is the password of r's directory (its cluster's).
func (r *Router) DirectoryPassword() string { return r.c.DirectoryPassword() }

// Cluster is the cluster r belongs to: a router started there (a standby
// on r's directory) reads r's secrets.
func (r *Router) Cluster() *Cluster { return r.c }
