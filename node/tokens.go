package node

import (
	"errors"
	"fmt"

	"github.com/fenec-go/fenec/internal/forwarded"
	"github.com/fenec-go/fenec/internal/tokenfile"
)

// tokens are the node's bearer tokens in use: the command line's at
// start, each --…-token-file's again on Reload. A request reads them once
// (Server.tokens) and checks against what it read.
type tokens struct {
	admin, data, repl string
}

// tokens returns the tokens in use.
func (s *Server) tokens() *tokens { return s.tok.Load() }

// reloadTokens reads every token file again and puts their tokens in use
// together: a file that cannot be read, or tokens that are one another's,
// change nothing. It reports which tokens changed, by name: a token is
// never logged.
func (s *Server) reloadTokens() ([]string, error) {
	f := s.cfg.TokenFiles
	if f == (TokenFiles{}) {
		return nil, nil
	}
	cur := s.tokens()
	next := *cur
	var errs []error
	for _, t := range []struct {
		path string
		dst  *string
	}{{f.Admin, &next.admin}, {f.HTTP, &next.data}, {f.Replication, &next.repl}} {
		if t.path == "" {
			continue
		}
		tok, err := tokenfile.Read(t.path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*t.dst = tok
	}
	errs = append(errs, checkTokens(next.admin, next.data, next.repl)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("token files not read again, the tokens in use kept: %w", errors.Join(errs...))
	}
	var changed []string
	if next.admin != cur.admin {
		changed = append(changed, "admin")
	}
	if next.data != cur.data {
		changed = append(changed, "http")
	}
	if next.repl != cur.repl {
		changed = append(changed, "replication")
	}
	if len(changed) == 0 {
		return nil, nil
	}
	s.tok.Store(&next)
	s.guard.setProof(forwarded.Proof(next.admin))
	s.reg.setReplToken(next.repl)
	return changed, nil
}
