package link

import "errors"

// errLinkLost: a watch of the link ended; the next step lists both
// directories again.
var errLinkLost = errors.New("link: a directory's watch ended: listing both again")
