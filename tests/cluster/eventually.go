package cluster

import "github.com/fenec-go/fenec/internal/testkit"

// Eventually is testkit.Eventually for a func() error: it calls fn until
// it returns nil, failing the test with fn's last error once timeout has
// passed. The timeout bounds a hang; it is never an assertion about speed.
var Eventually = testkit.Eventually[func() error]
