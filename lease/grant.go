package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Grant is one numbered grant, router to node: the body of
// POST /_admin/lease.
type Grant struct {
	// Term is the directory's term the granting router leads at.
	Term uint64 `json:"term"`
	// Router names one incarnation of the granting router. Numbers (N) are
	// counted per Router, so it must change whenever the router's count
	// starts again (a restart or a promotion): e.g. "<name>-<start time>".
	Router string `json:"router"`
	// N is this grant's own number, from 1, +1 per grant to this node.
	N uint64 `json:"n"`
	// Ack is the number of the newest grant whose answer came back to the
	// router in time; 0 when none has.
	Ack uint64 `json:"ack"`
	// MS is the lease length in milliseconds, run from the node's answer
	// to grant Ack.
	MS int64 `json:"ms"`
	// Tenants is the tenant list; nil when unchanged since the list the
	// node holds (an empty, non-nil list names no tenant).
	Tenants []string `json:"tenants"`
	// InStep names the tenants of the list whose copy the directory
	// counts on holding every write the node answers: under --sync always
	// a write on one is answered only once a copy holds it, or once a
	// later list no longer names it here (the directory then records the
	// copy behind, and no failover promotes it unforced). Sent with
	// Tenants only.
	InStep []string `json:"in_step,omitempty"`
	// Replicas names, for each tenant of the list with a replica, the
	// replica's node: only a copy following under that name (its feed's
	// copy=) counts as holding a write. Sent with Tenants only.
	Replicas map[string]string `json:"replicas,omitempty"`
	// Behind names the tenants of the list whose copy the directory
	// records as behind, each with the seq the node asked it at: a write
	// waiting since an ask at that seq or before is answered; the node
	// says when a copy has caught up. Sent with Tenants only.
	Behind map[string]uint64 `json:"behind,omitempty"`
	// List is the id of the list the grant stands for (see ListID).
	List string `json:"list"`
	// Dir names the directory the granting router leads ("global", or
	// "region:<r>"): a node takes grants from the one directory it is
	// bound to, and from another only through a Handoff. Terms compare
	// only within a directory.
	Dir string `json:"dir,omitempty"`
	// Epoch is the leasing epoch of the node's region: it moves on each
	// time the region's leasing changes hands, so a grant of an earlier
	// era is refused.
	Epoch uint64 `json:"epoch,omitempty"`
	// Handoff, on a grant of a directory that took the node's region over,
	// says from which directory and at which of its terms, or that it was
	// taken by force.
	Handoff *Handoff `json:"handoff,omitempty"`
}

// Handoff is what a grant from a directory taking a region over carries:
// the directory that gave the region (the node's own, for the node to take
// it), the giver's term when it gave, or Force when the taker took it
// without the giver.
type Handoff struct {
	From  string `json:"from"`
	Term  uint64 `json:"term,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// List is what a grant's list names: the tenants, and of them those whose
// copy is in step and those whose copy is behind.
type List struct {
	Tenants  []string
	InStep   []string
	Behind   map[string]uint64
	Replicas map[string]string
}

// ID is the list's id.
func (l List) ID() string { return listID(l.Tenants, l.InStep, l.Behind, l.Replicas) }

// Equal says whether two lists name the same tenants alike.
func (l List) Equal(o List) bool { return l.ID() == o.ID() }

// Answer is the node's 200 answer to a grant.
type Answer struct {
	// Took: the grant was taken (its list, and its lease if its ack was
	// found). False when it was not newer than the grant the running
	// lease came from.
	Took bool `json:"took"`
	// Ran: the node has run a lease from one of this router's grants.
	Ran bool `json:"ran"`
	// N echoes the grant's number.
	N uint64 `json:"n"`
	// Term is the highest term the node has taken.
	Term uint64 `json:"term"`
	// LeftMS is what is left of the node's lease, in milliseconds (0: it
	// holds none).
	LeftMS int64 `json:"left_ms"`
	// Behind asks the router to record the copy of each tenant named
	// behind: a write on it (at the seq given) waited out its bound for
	// a copy and is held until the list no longer has the tenant in step.
	Behind map[string]uint64 `json:"behind,omitempty"`
	// Caught names tenants the list has behind whose copy holds again
	// everything the node has durable, and is waited for again.
	Caught []string `json:"caught,omitempty"`
	// Dir and Epoch are the node's binding after the grant: the directory
	// leasing it and the epoch.
	Dir   string `json:"dir,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
}

// Validate checks a grant's shape: a router, a number from 1, an ack below
// it, a positive lease, and a list id, which is its list's when it carries
// one.
func (g Grant) Validate() error {
	switch {
	case g.Router == "":
		return fmt.Errorf("%w: no router", ErrBadGrant)
	case g.N == 0:
		return fmt.Errorf("%w: n is 0", ErrBadGrant)
	case g.Ack >= g.N:
		return fmt.Errorf("%w: ack %d not below n %d", ErrBadGrant, g.Ack, g.N)
	case g.MS <= 0:
		return fmt.Errorf("%w: lease of %d ms", ErrBadGrant, g.MS)
	case g.List == "":
		return fmt.Errorf("%w: no list id", ErrBadGrant)
	case g.Tenants != nil && listID(g.Tenants, g.InStep, g.Behind, g.Replicas) != g.List:
		return fmt.Errorf("%w: list id %s is not its list's", ErrBadGrant, g.List)
	case g.Tenants == nil && (g.InStep != nil || g.Behind != nil || g.Replicas != nil):
		return fmt.Errorf("%w: copies' steps sent without the tenant list", ErrBadGrant)
	case g.Handoff != nil && (g.Handoff.From == "" || g.Handoff.From == g.Dir):
		return fmt.Errorf("%w: a handoff from %q to %q", ErrBadGrant, g.Handoff.From, g.Dir)
	}
	return nil
}

// ListID is the id of a tenant list: a digest of its sorted, distinct names,
// so two lists have one id exactly when they name the same tenants.
func ListID(tenants []string) string { return listID(tenants, nil, nil, nil) }

// listID digests a list with its copies' steps: the tenants' names as
// ListID has them, then, only when not empty, the in-step names, the
// behind ones with their seqs and the replicas' names, each part after a
// marker no name holds.
func listID(tenants, inStep []string, behind map[string]uint64, replicas map[string]string) string {
	var b strings.Builder
	var marked, named []string
	for t, seq := range behind {
		marked = append(marked, t+"@"+strconv.FormatUint(seq, 10))
	}
	for t, r := range replicas {
		named = append(named, t+"="+r)
	}
	for i, part := range [][]string{tenants, inStep, marked, named} {
		if i > 0 {
			if len(part) == 0 {
				continue
			}
			b.WriteString([]string{"", "\x00in_step\n", "\x00behind\n", "\x00replicas\n"}[i])
		}
		names := slices.Clone(part)
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			b.WriteString(n)
			b.WriteByte('\n') // each name ends, so no two lists join alike
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// ErrorBody is the JSON body of a refused grant.
type ErrorBody struct {
	Error string `json:"error"`
	// Term is the node's highest term, on a lower-term refusal and on a
	// refusal for another directory.
	Term uint64 `json:"term,omitempty"`
	// LeasedBy and Epoch name the directory the node is bound to and its
	// epoch, on a refusal of a grant from another directory (or an
	// earlier epoch).
	LeasedBy string `json:"leased_by,omitempty"`
	Epoch    uint64 `json:"epoch,omitempty"`
	// Asked, on a refusal of a grant past the bounds (ErrEpochBound), is
	// the epoch or term the grant named.
	Asked uint64 `json:"asked,omitempty"`
}

// ReplyStatus maps an error from NodeLease.Handle (or ErrTakesNoLease) to
// its HTTP status and body. Errors it does not know are 500.
func ReplyStatus(err error) (int, ErrorBody) {
	var te *TermError
	var de *DirectoryError
	var be *BoundError
	switch {
	case errors.As(err, &be):
		return http.StatusConflict, ErrorBody{Error: err.Error(), Term: be.Term, LeasedBy: be.Dir, Epoch: be.Epoch, Asked: be.Asked}
	case errors.As(err, &de):
		return http.StatusConflict, ErrorBody{Error: err.Error(), Term: de.Term, LeasedBy: de.Dir, Epoch: de.Epoch}
	case errors.As(err, &te):
		return http.StatusConflict, ErrorBody{Error: err.Error(), Term: te.Highest}
	case errors.Is(err, ErrTakesNoLease):
		return http.StatusConflict, ErrorBody{Error: ErrTakesNoLease.Error()}
	case errors.Is(err, ErrNeedsList):
		return http.StatusPreconditionFailed, ErrorBody{Error: err.Error()}
	case errors.Is(err, ErrBadGrant):
		return http.StatusBadRequest, ErrorBody{Error: err.Error()}
	}
	return http.StatusInternalServerError, ErrorBody{Error: err.Error()}
}

// DecodeReply turns a node's reply to a grant (status and body) back into
// an Answer or the refusal it stands for: *BoundError, *DirectoryError, *TermError,
// ErrTakesNoLease, ErrNeedsList, ErrBadGrant, or an error naming the
// status.
func DecodeReply(status int, body []byte) (Answer, error) {
	if status == http.StatusOK {
		var a Answer
		if err := json.Unmarshal(body, &a); err != nil {
			return Answer{}, fmt.Errorf("decode answer: %w", err)
		}
		return a, nil
	}
	var eb ErrorBody
	_ = json.Unmarshal(body, &eb) // a body that is not JSON still has a status
	switch status {
	case http.StatusConflict:
		if eb.Error == ErrTakesNoLease.Error() {
			return Answer{}, ErrTakesNoLease
		}
		if eb.Asked != 0 {
			return Answer{}, &BoundError{Dir: eb.LeasedBy, Epoch: eb.Epoch, Term: eb.Term, Asked: eb.Asked}
		}
		if eb.LeasedBy != "" {
			return Answer{}, &DirectoryError{Dir: eb.LeasedBy, Epoch: eb.Epoch, Term: eb.Term}
		}
		if eb.Term > 0 {
			return Answer{}, &TermError{Highest: eb.Term}
		}
	case http.StatusPreconditionFailed:
		return Answer{}, ErrNeedsList
	case http.StatusBadRequest:
		return Answer{}, fmt.Errorf("%w: %s", ErrBadGrant, eb.Error)
	}
	return Answer{}, fmt.Errorf("grant answered %d: %s", status, eb.Error)
}
