package global

import (
	"bufio"
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Node tokens are sealed in the directory: a node record holds its admin
// token as "sealed", AES-256-GCM under the routers' key, with the
// record's name, address and node id as associated data. Whoever reads
// the directory — its etcd port, a snapshot, a backup — learns no token.
// And a record changed outside fenec does not open: pointed at another
// listener (its addr), given another node's sealed token, or renamed, it
// fails the check, and a router sends that listener neither the token
// nor a client's request. Only a router holding the key writes a record
// that opens.
//
// Why an AEAD under a shared key rather than etcd's access control
// alone: the directory is copied — mirrored into every region's own,
// snapshotted, backed up — and a key kept in a file the routers read goes
// with none of those copies. Why the address in the associated data: the
// token and a client's requests must go only where the operator recorded
// the node; a record whose address moved without the key is not the
// operator's.

// sealVersion prefixes a sealed token; the associated data starts with
// sealContext, so a sealed token means nothing elsewhere.
const (
	sealVersion = "v1."
	sealContext = "fenec node token v1"
	keyIDLen    = 4
)

// ErrKeyFile: the key file holds no usable key.
var ErrKeyFile = errors.New("directory key file")

// Keyring is the routers' key and the keys before it: the first seals,
// any opens (a key being rotated out still opens the records it sealed
// until they are written again).
type Keyring struct {
	keys []sealKey
}

type sealKey struct {
	id   [keyIDLen]byte
	aead cipher.AEAD
}

// NewKeyText makes a new key as a key file holds it (base64 of 32 random
// bytes).
func NewKeyText() string {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return base64.StdEncoding.EncodeToString(k[:])
}

// LoadKeyring reads a key file: one key a line, base64 of 32 bytes, the
// first sealing and every one opening; blank lines and lines starting
// with # are skipped.
func LoadKeyring(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	return ParseKeyring(b)
}

// ParseKeyring reads a key file's contents (LoadKeyring).
func ParseKeyring(b []byte) (*Keyring, error) {
	k := &Keyring{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("%w: line %d is not base64 of 32 bytes", ErrKeyFile, n)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		var id [keyIDLen]byte
		copy(id[:], sum[:])
		k.keys = append(k.keys, sealKey{id: id, aead: aead})
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("%w: no key in it", ErrKeyFile)
	}
	return k, nil
}

// ID names the ring's first key, the one that seals: the first bytes of
// its SHA-256 in hex, as every token it sealed starts with them. It
// says which file a router needs and gives nothing of the key away.
func (k *Keyring) ID() string { return hex.EncodeToString(k.keys[0].id[:]) }

// Holds reports whether one of the ring's keys is named id (ID).
func (k *Keyring) Holds(id string) bool {
	for _, key := range k.keys {
		if hex.EncodeToString(key.id[:]) == id {
			return true
		}
	}
	return false
}

// SealedKeyID names the key a sealed token was sealed under ("" for a
// value that is not a sealed token).
func SealedKeyID(sealed string) string {
	enc, ok := strings.CutPrefix(sealed, sealVersion)
	if !ok {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) < keyIDLen {
		return ""
	}
	return hex.EncodeToString(raw[:keyIDLen])
}

// SealInfo is the directory's note of the key its node tokens are sealed
// under (KeySeal): the key's ID, the router that recorded it and the file
// that router read it from. It holds no secret; a router that does not
// hold the key says, from it, which file to copy from where.
type SealInfo struct {
	Key    string `json:"key"`
	Router string `json:"router"`
	File   string `json:"file"`
}

// ForeignSeals lists the node records of d sealed under a key k does not
// hold (k nil: any sealed record), by that key's ID. d is read through
// Sealing or not: a record that opens there holds no sealed token.
func ForeignSeals(ctx context.Context, d Directory, k *Keyring) (map[string][]string, error) {
	nodes, _, err := NewStore(d).ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for name, n := range nodes {
		id := SealedKeyID(n.Value.Sealed)
		if id == "" || (k != nil && k.Holds(id)) {
			continue
		}
		out[id] = append(out[id], name)
	}
	return out, nil
}

// sealAD is what a sealed token is bound to: the record's name, address
// and node id.
func sealAD(name, addr, id string) []byte {
	return []byte(sealContext + "\x00" + name + "\x00" + addr + "\x00" + id)
}

// Seal seals token for node name at addr with id under the first key.
func (k *Keyring) Seal(name, addr, id, token string) string {
	key := k.keys[0]
	nonce := make([]byte, key.aead.NonceSize(), keyIDLen+key.aead.NonceSize()+len(token)+key.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out := append(key.id[:len(key.id):len(key.id)], nonce...)
	out = key.aead.Seal(out, nonce, []byte(token), sealAD(name, addr, id))
	return sealVersion + base64.RawURLEncoding.EncodeToString(out)
}

// Open opens a token Seal sealed for the same name, address and id; any
// other record, or a key not in the ring, does not open.
func (k *Keyring) Open(name, addr, id, sealed string) (string, error) {
	token, _, err := k.open(name, addr, id, sealed)
	return token, err
}

// open is Open, also saying which of the ring's keys opened it.
func (k *Keyring) open(name, addr, id, sealed string) (string, int, error) {
	enc, ok := strings.CutPrefix(sealed, sealVersion)
	if !ok {
		return "", 0, errors.New("not a sealed token of a version this router knows")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) < keyIDLen {
		return "", 0, errors.New("sealed token is not well formed")
	}
	for i, key := range k.keys {
		if !bytes.Equal(raw[:keyIDLen], key.id[:]) {
			continue
		}
		rest := raw[keyIDLen:]
		ns := key.aead.NonceSize()
		if len(rest) < ns {
			return "", 0, errors.New("sealed token is not well formed")
		}
		plain, err := key.aead.Open(nil, rest[:ns], rest[ns:], sealAD(name, addr, id))
		if err != nil {
			return "", 0, errors.New("sealed token does not open for this record: it was changed outside fenec")
		}
		return string(plain), i, nil
	}
	return "", 0, errors.New("sealed under a key this router does not hold")
}

// Sealing wraps d so that node records are written with their tokens
// sealed under k, and read with them opened (Node.Token). A record read
// whose token does not open keeps it sealed (Node.Sealed), and one
// holding its token in clear is marked so (Node.Clear): a router uses
// neither (UsableNode). With a nil k, records pass as they are: tokens in
// clear are written and read so, and sealed ones stay sealed.
func Sealing(d Directory, k *Keyring) Directory {
	return &sealing{Directory: d, k: k}
}

type sealing struct {
	Directory
	k *Keyring
}

func (s *sealing) Get(ctx context.Context, key string) (KV, error) {
	kv, err := s.Directory.Get(ctx, key)
	if err == nil {
		kv.Value = s.open(kv.Key, kv.Value)
	}
	return kv, err
}

func (s *sealing) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	kvs, rev, err := s.Directory.List(ctx, prefix)
	for i := range kvs {
		kvs[i].Value = s.open(kvs[i].Key, kvs[i].Value)
	}
	return kvs, rev, err
}

func (s *sealing) Put(ctx context.Context, key string, value []byte) (int64, error) {
	return s.Directory.Put(ctx, key, s.seal(key, value))
}

func (s *sealing) Txn(ctx context.Context, conds []Cond, ops []Op) (int64, error) {
	sealed := make([]Op, len(ops))
	for i, op := range ops {
		sealed[i] = op
		if !op.Delete {
			sealed[i].Value = s.seal(op.Key, op.Value)
		}
	}
	return s.Directory.Txn(ctx, conds, sealed)
}

// Watch opens the tokens of the node records in every event, on a
// goroutine that ends when the watch does (ctx, or the directory
// closing).
func (s *sealing) Watch(ctx context.Context, prefix string, after int64) (<-chan WatchResponse, error) {
	in, err := s.Directory.Watch(ctx, prefix, after)
	if err != nil {
		return nil, err
	}
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		for r := range in {
			for i := range r.Events {
				if r.Events[i].Type == EventPut {
					r.Events[i].KV.Value = s.open(r.Events[i].KV.Key, r.Events[i].KV.Value)
				}
			}
			select {
			case out <- r:
			case <-ctx.Done():
				for range in { // let the inner watch close its channel
				}
				return
			}
		}
	}()
	return out, nil
}

// nodeName is the node a key holds, if it holds one (a far node's copy
// in a region's directory too: its token is sealed there as anywhere).
func nodeName(key string) (string, bool) {
	kind, name, ok := splitKey(key)
	return name, ok && (kind == PrefixNodes || kind == PrefixFarNodes)
}

// seal rewrites a node record's "token" as "sealed"; other values, and
// every value without a keyring, pass as they are.
func (s *sealing) seal(key string, value []byte) []byte {
	name, ok := nodeName(key)
	if !ok || s.k == nil {
		return value
	}
	m, fields, ok := recordFields(value)
	if !ok {
		return value
	}
	delete(m, "clear")
	delete(m, "rekey")
	if fields.Token != "" {
		delete(m, "token")
		m["sealed"], _ = json.Marshal(s.k.Seal(name, fields.Addr, fields.ID, fields.Token))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return value
	}
	return b
}

// open rewrites a node record's "sealed" as "token" where it opens (and
// marks one sealed under a key after the first with "rekey"), and marks a
// token held in clear with "clear" (with a keyring).
func (s *sealing) open(key string, value []byte) []byte {
	name, ok := nodeName(key)
	if !ok || s.k == nil {
		return value
	}
	m, fields, ok := recordFields(value)
	if !ok {
		return value
	}
	switch {
	case fields.Sealed != "":
		token, key, err := s.k.open(name, fields.Addr, fields.ID, fields.Sealed)
		if err != nil {
			return value // left sealed: not used
		}
		delete(m, "sealed")
		m["token"], _ = json.Marshal(token)
		if key > 0 {
			m["rekey"] = json.RawMessage("true")
		}
	case fields.Token != "":
		m["clear"] = json.RawMessage("true")
	default:
		return value
	}
	b, err := json.Marshal(m)
	if err != nil {
		return value
	}
	return b
}

// sealedFields are the fields of a node record sealing reads.
type sealedFields struct {
	Addr   string `json:"addr"`
	ID     string `json:"id"`
	Token  string `json:"token"`
	Sealed string `json:"sealed"`
}

// recordFields decodes a node record as its raw fields and the ones
// sealing needs; ok is false for a value that is not such a record.
func recordFields(value []byte) (map[string]json.RawMessage, sealedFields, bool) {
	var m map[string]json.RawMessage
	var f sealedFields
	if json.Unmarshal(value, &m) != nil || json.Unmarshal(value, &f) != nil {
		return nil, sealedFields{}, false
	}
	return m, f, true
}

// UsableNode says whether a router may send node n its token and
// clients' requests (read through Sealing): not while its token is
// sealed under a key this router does not hold, or does not open for the
// record (changed outside fenec), nor while the directory holds it in
// clear and the router has a key (written before sealing, or by a
// router without the key).
func UsableNode(n Node) error {
	switch {
	case n.Sealed != "":
		return fmt.Errorf("%w: its token is sealed and does not open here: start this router with the routers' --directory-key-file; if it has it, the record was changed outside fenec: record the node again with PUT /_shard/nodes/<node>", ErrUntrusted)
	case n.Clear:
		return fmt.Errorf("%w: the directory holds its token in clear: the leading router seals it as it starts with --directory-key-file, or record the node again with PUT /_shard/nodes/<node>", ErrUntrusted)
	}
	return nil
}
