package region

import (
	"errors"
	"fmt"

	"github.com/fenec-go/fenec/global"
)

// notFoundError is a node or tenant the directory does not hold, named
// as the API names it: it is its route's sentinel (as) and
// global.ErrNotFound.
type notFoundError struct {
	as   error  // ErrUnknownNode, ErrUnknownTenant
	name string // "" when the directory's error named none
}

func (e *notFoundError) Error() string {
	switch {
	case e.name == "":
		return e.as.Error()
	case e.as == ErrUnknownNode:
		return fmt.Sprintf("unknown node %q: no node is recorded under that name (GET /_shard/nodes lists them)", e.name)
	case e.as == ErrUnknownTenant:
		return fmt.Sprintf("unknown tenant %q: no placement names it; create it with PUT /_shard/tenants/%s", e.name, e.name)
	}
	return fmt.Sprintf("%v: %q", e.as, e.name)
}

func (e *notFoundError) Unwrap() []error { return []error{e.as, global.ErrNotFound} }

// errNotFoundAs turns the directory's not-found into the route's own,
// naming the record as the API does, never by its key in the directory.
func errNotFoundAs(err, as error) error {
	if !errors.Is(err, global.ErrNotFound) {
		return err
	}
	nf := &notFoundError{as: as}
	var rn *global.RecordNotFound
	if errors.As(err, &rn) {
		nf.name = rn.Name
	}
	return nf
}

// isNotFound reports a record that does not exist.
func isNotFound(err error) bool { return errors.Is(err, global.ErrNotFound) }
