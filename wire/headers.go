package wire

// The Fenec-* headers, in their canonical form (usable as http.Header
// keys as they are). API.md §1.1 says what each means.
const (
	// HeaderSeq is on every successful write: the tenant's change number
	// after it.
	HeaderSeq = "Fenec-Seq"
	// HeaderAfter on a read: answer once the copy's seq reaches it.
	HeaderAfter = "Fenec-After"
	// HeaderHistory with HeaderAfter: only a file whose history holds
	// that write answers.
	HeaderHistory = "Fenec-History"
	// HeaderWait on /query or /batch: hold a claim that took nothing for
	// up to this many milliseconds.
	HeaderWait = "Fenec-Wait"
	// HeaderNext on a change feed's answer: the since of the next page.
	HeaderNext = "Fenec-Next"
	// HeaderRefused on a 503 says why a write was refused unrun:
	// RefusedLease or RefusedReplica.
	HeaderRefused = "Fenec-Refused"
	// HeaderClient, from a router to a node only: the address of the
	// client the router forwards for (internal/forwarded).
	HeaderClient = "Fenec-Client"
	// HeaderRouterProof, beside HeaderClient: the router's proof that it
	// holds the node's admin token (internal/forwarded.Proof).
	HeaderRouterProof = "Fenec-Router-Proof"
	// HeaderNode on an admin request: the id of the node it is meant
	// for; any other node refuses it (409) and changes nothing.
	HeaderNode = "Fenec-Node"
)

// Values of HeaderRefused.
const (
	// RefusedLease: the node holds no lease naming the tenant (yet); a
	// router asks again once its grant reached the node.
	RefusedLease = "lease"
	// RefusedReplica: the node's file is a copy; write to its primary.
	RefusedReplica = "replica"
)
