package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenec-go/fenec/bench/internal/benchkit"
)

// The headers the bench sends and reads (wire's names, spelled here so
// that the bench is a client of the HTTP API and nothing more).
const (
	hdrMaxStaleness = "Fenec-Max-Staleness"
	hdrAfter        = "Fenec-After"
	hdrHistory      = "Fenec-History"
	hdrSeq          = "Fenec-Seq"
	hdrServedBy     = "Fenec-Served-By"
	hdrStaleness    = "Fenec-Staleness-Ms"
	hdrNode         = "Fenec-Node"
)

// readQuery is the keyed read every case times: the tenant's one row.
const readQuery = "get kv where k = 'x'"

// reader is one client of a router for one tenant, on one keep-alive
// connection.
type reader struct {
	d      *deployment
	base   string
	tenant string
	c      *http.Client
}

// newReader is a client of the router at base for t0.
func newReader(d *deployment, base string) *reader { return newClient(d, base, tenant) }

// newClient is a client of the router at base for tenant t.
func newClient(d *deployment, base, t string) *reader {
	return &reader{d: d, base: base, tenant: t, c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}}
}

func (r *reader) close() { r.c.CloseIdleConnections() }

// answer is one read's answer as the bench sees it.
type answer struct {
	sent     time.Time     // when the request was sent
	took     time.Duration // until its whole answer was read
	node     string        // the node that answered (by Fenec-Node)
	servedBy string        // Fenec-Served-By, "" when none
	stale    int64         // Fenec-Staleness-Ms; -1 when absent or unbounded
	n        int64         // the row's n: the last write it holds
}

// read sends the keyed read of row x with the header pairs hdr and reads
// the answer.
func (r *reader) read(hdr ...string) (answer, error) { return r.readRow("x", hdr...) }

// readRow sends the keyed read of row k with the header pairs hdr and
// reads the answer.
func (r *reader) readRow(k string, hdr ...string) (answer, error) {
	q := readQuery
	if k != "x" {
		q = fmt.Sprintf("get kv where k = '%s'", k)
	}
	req, err := http.NewRequest("POST", r.base+"/t/"+r.tenant+"/query", strings.NewReader(benchkit.QueryBody(q)))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	a := answer{sent: time.Now(), stale: -1}
	res, err := r.c.Do(req)
	if err != nil {
		return a, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	a.took = time.Since(a.sent)
	if err != nil {
		return a, err
	}
	if res.StatusCode != 200 {
		return a, fmt.Errorf("a read answered %d: %s", res.StatusCode, b)
	}
	a.node = r.d.ids[res.Header.Get(hdrNode)]
	a.servedBy = res.Header.Get(hdrServedBy)
	if ms, err := strconv.ParseInt(res.Header.Get(hdrStaleness), 10, 64); err == nil {
		a.stale = ms
	}
	var rows []struct{ N int64 }
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 1 {
		return a, fmt.Errorf("a read answered %s", b)
	}
	a.n = rows[0].N
	return a, nil
}

// written is one write's answer: its seq and history, the node that
// gave it (by Fenec-Node), and when it came.
type written struct {
	seq, history string
	node         string
	took         time.Duration
	acked        time.Time
	again        int // times asked again under the same key
}

// write sets row x's n to v, with an idempotency key so that a retried
// write lands once.
func (r *reader) write(v int64) (written, error) { return r.writeRow("x", v, 5) }

// writeRow sets row k's n to v, asked at most tries times under one
// idempotency key, 50 ms apart.
func (r *reader) writeRow(k string, v int64, tries int) (written, error) {
	body := benchkit.QueryBody(fmt.Sprintf("set kv {n: %d} where k = '%s'", v, k))
	key := "geo-" + k + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(v, 10)
	began := time.Now()
	var last error
	for try := range tries {
		req, err := http.NewRequest("POST", r.base+"/t/"+r.tenant+"/query", strings.NewReader(body))
		if err != nil {
			return written{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := r.c.Do(req)
		if err != nil {
			last = err
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			last = fmt.Errorf("a write answered %d: %s", res.StatusCode, b)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		now := time.Now()
		return written{seq: res.Header.Get(hdrSeq), history: res.Header.Get(hdrHistory), node: r.d.ids[res.Header.Get(hdrNode)],
			took: now.Sub(began), acked: now, again: try}, nil
	}
	return written{}, last
}
