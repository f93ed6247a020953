package tlsx

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatch is how often a Source's Watch looks at its files.
const DefaultWatch = 2 * time.Second

// sessionsKept bounds the TLS sessions a Source keeps for resumption,
// across every peer it dials.
const sessionsKept = 1024

// Source holds a process's certificate, key and CA bundle as last loaded
// from its Files, and swaps them whole on Reload: every handshake reads
// the material current when it starts. Safe for concurrent use.
type Source struct {
	files    Files
	log      *slog.Logger
	sessions tls.ClientSessionCache

	mu  sync.Mutex // serialises loads; guards sum and lastErr
	sum [sha256.Size]byte
	// lastErr is the last failed load's message, logged once.
	lastErr string

	cur atomic.Pointer[material]
	// listener holds the two listener configs (client certificate asked
	// for, or required); built once, each reading cur per handshake.
	listener [2]*tls.Config
}

// material is one load of the files.
type material struct {
	cert *tls.Certificate // nil without Files.Cert
	pool *x509.CertPool   // nil without Files.CA: system roots, no client certificates asked
	// server is the config handed to a handshake on a listener, by
	// whether a client certificate is required.
	server [2]*tls.Config
}

// Load reads f and returns a Source over it; log (nil: discarded)
// receives reloads and the failures that keep the old material.
func Load(f Files, log *slog.Logger) (*Source, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: f, log: log, sessions: tls.NewLRUClientSessionCache(sessionsKept)}
	for i := range s.listener {
		s.listener[i] = &tls.Config{GetConfigForClient: s.forClient(i == 1)}
	}
	if _, err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Files returns what the Source loads.
func (s *Source) Files() Files { return s.files }

// Reload reads the files again and, if they changed and hold a valid
// certificate, key and bundle, swaps them in for every handshake from
// now on. On an error the Source keeps what it had.
func (s *Source) Reload() error {
	changed, err := s.load()
	if err != nil {
		return err
	}
	if changed {
		s.log.Info("tls files reloaded", s.describe()...)
	}
	return nil
}

// Loop is a server's reload loop, until done closes: at every signal
// from reload (SIGHUP) it calls reloadAll (the TLS files and whatever else
// the server reads again, token files say), logging a failure; every
// `every` (DefaultWatch when zero) it calls look, which reloads the TLS
// files if they changed (a failed load, a certificate written before its
// key say, is logged once by the Source and tried again at the next look).
func Loop(done <-chan struct{}, reload <-chan os.Signal, every time.Duration, reloadAll func() error, look func(), log *slog.Logger) {
	if every <= 0 {
		every = DefaultWatch
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-reload:
			if err := reloadAll(); err != nil {
				log.Error("reload", "err", err)
			}
		case <-t.C:
			look()
		}
	}
}

// load reads the files and swaps in what they hold if it differs from
// what was last loaded.
func (s *Source) load() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, sum, err := s.read()
	if err == nil && sum == s.sum && s.cur.Load() != nil {
		return false, nil
	}
	var m *material
	if err == nil {
		m, err = s.build(raw)
	}
	if err != nil {
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			if s.cur.Load() != nil {
				s.log.Error("tls files not reloaded: keeping the certificates loaded before", "err", err)
			}
		}
		return false, err
	}
	s.lastErr = ""
	s.sum = sum
	s.cur.Store(m)
	return true, nil
}

// rawFiles is the bytes of the three files.
type rawFiles struct{ cert, key, ca []byte }

func (s *Source) read() (rawFiles, [sha256.Size]byte, error) {
	var (
		raw rawFiles
		err error
	)
	h := sha256.New()
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{s.files.Cert, &raw.cert}, {s.files.Key, &raw.key}, {s.files.CA, &raw.ca}} {
		if f.path == "" {
			h.Write([]byte{0})
			continue
		}
		if *f.dst, err = os.ReadFile(f.path); err != nil {
			return rawFiles{}, [sha256.Size]byte{}, fmt.Errorf("%w: %w", ErrFiles, err)
		}
		h.Write([]byte{1})
		h.Write(*f.dst)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return raw, sum, nil
}

// build parses the files' bytes into the material handshakes use.
func (s *Source) build(raw rawFiles) (*material, error) {
	m := &material{}
	if s.files.Cert != "" {
		cert, err := tls.X509KeyPair(raw.cert, raw.key)
		if err != nil {
			return nil, fmt.Errorf("%w: %s and %s: %w", ErrFiles, s.files.Cert, s.files.Key, err)
		}
		m.cert = &cert
	}
	if s.files.CA != "" {
		pool, err := parsePool(raw.ca)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrFiles, s.files.CA, err)
		}
		m.pool = pool
	}
	for i := range m.server {
		m.server[i] = s.serverConfig(m, i == 1)
	}
	return m, nil
}

// parsePool reads every CERTIFICATE block of a PEM bundle.
func parsePool(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for len(b) > 0 {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, ErrNoCerts
	}
	return pool, nil
}

// describe is the log attributes of the certificate loaded.
func (s *Source) describe() []any {
	m := s.cur.Load()
	if m == nil || m.cert == nil || m.cert.Leaf == nil {
		return []any{"ca", s.files.CA}
	}
	leaf := m.cert.Leaf
	return []any{"cert", s.files.Cert, "subject", leaf.Subject.CommonName,
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339), "ca", s.files.CA}
}

// NotAfter is when the certificate loaded expires (zero without one).
func (s *Source) NotAfter() time.Time {
	m := s.cur.Load()
	if m == nil || m.cert == nil || m.cert.Leaf == nil {
		return time.Time{}
	}
	return m.cert.Leaf.NotAfter
}
