package node

import (
	"errors"
	"fmt"

	"github.com/fenec-go/fenec/internal/tokenfile"
)

// tokens are the node's bearer tokens in use: the command line's at
// start, each --…-token-file's again on Reload. A request reads them once
// (Server.tokens) and checks against what it read. The tokens a reload
// replaced are taken as well until the next reload, so that routers,
// copies and clients can move to the new ones without a refusal: the
// operator's second SIGHUP ends the change.
type tokens struct {
	admin, data, repl             string
	prevAdmin, prevData, prevRepl string
}

// previous is the token a reload replaced by want, still taken until the
// next reload ("" when none).
func (t *tokens) previous(want string) string {
	switch want {
	case "":
		return ""
	case t.admin:
		return t.prevAdmin
	case t.data:
		return t.prevData
	case t.repl:
		return t.prevRepl
	}
	return ""
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
	next := tokens{admin: cur.admin, data: cur.data, repl: cur.repl}
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
		changed, next.prevAdmin = append(changed, "admin"), cur.admin
	}
	if next.data != cur.data {
		changed, next.prevData = append(changed, "http"), cur.data
	}
	if next.repl != cur.repl {
		changed, next.prevRepl = append(changed, "replication"), cur.repl
	}
	if next == *cur {
		return nil, nil
	}
	// The proofs and the replication token first: once a request sees the
	// new tokens, everything made from them is in place (the proofs of the
	// tokens replaced stay taken until the next reload anyway).
	s.guard.setProofs(proofsOf(next.admin, next.prevAdmin))
	s.reg.setReplToken(next.repl)
	s.tok.Store(&next)
	if len(changed) == 0 {
		s.log.Info("token files read again: the tokens the last reload replaced are no longer taken")
	}
	return changed, nil
}
