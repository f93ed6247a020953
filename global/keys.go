package global

import (
	"fmt"
	"strings"

	"github.com/fenec-go/fenec/wire"
)

// The key layout, relative to the directory's prefix (DESIGN.md §4).
const (
	KeyTerm        = "meta/term"            // the directory's term
	KeyLeader      = "meta/leader"          // Leader: the router that takes changes
	KeyLeaseRecord = "meta/lease_record_ms" // longest lease a router leasing from here may have granted
	KeyName        = "meta/name"            // the directory's name: DirGlobal or DirOfRegion(r)
	KeySeal        = "meta/seal"            // SealInfo: the key node tokens are sealed under
	PrefixRegions  = "regions/"             // regions/<r>: Region
	PrefixNodes    = "nodes/"               // nodes/<n>: Node
	PrefixTenants  = "tenants/"             // tenants/<t>: Tenant
	PrefixQuotas   = "quotas/"              // quotas/<t>: Quota

	// PrefixStandbys keys the standby node that takes a copy of every
	// tenant of a node: standbys/<n> = "<standby>". The watcher's view
	// and the mirror leave these keys out; a router reads them when it
	// picks a copy's node.
	PrefixStandbys = "standbys/"

	// PrefixFarTenants and PrefixFarNodes key a region's read-only copies
	// of the records of far tenants (far.go): tenants homed in another
	// region with a copy in this one, and their primaries' nodes. Only a
	// region's directory holds them, copied down from the global one.
	PrefixFarTenants = "far/tenants/" // far/tenants/<t>: Tenant
	PrefixFarNodes   = "far/nodes/"   // far/nodes/<n>: Node
)

// RegionKey returns the key of region r.
func RegionKey(r string) string { return PrefixRegions + r }

// NodeKey returns the key of node n.
func NodeKey(n string) string { return PrefixNodes + n }

// TenantKey returns the key of tenant t.
func TenantKey(t string) string { return PrefixTenants + t }

// QuotaKey returns the key of tenant t's quota.
func QuotaKey(t string) string { return PrefixQuotas + t }

// FarTenantKey returns the key of far tenant t's record in a region's
// directory.
func FarTenantKey(t string) string { return PrefixFarTenants + t }

// FarNodeKey returns the key of far node n's record in a region's
// directory.
func FarNodeKey(n string) string { return PrefixFarNodes + n }

// StandbyKey returns the key of node n's standby.
func StandbyKey(n string) string { return PrefixStandbys + n }

// ValidName reports whether s is a name fenec accepts for a tenant, node,
// region or router: wire.ValidName, the one rule every side checks.
func ValidName(s string) bool { return wire.ValidName(s) }

// CheckName returns ErrInvalidName, saying what was named, unless ValidName.
func CheckName(what, s string) error {
	if !ValidName(s) {
		if len(s) > 72 {
			s = s[:64] + "…" // the name is not echoed whole: it may be anything a client sent
		}
		return fmt.Errorf("%s %q: %w", what, s, ErrInvalidName)
	}
	return nil
}

// splitKey names the record a key holds: its kind (one of the Prefix
// constants, or the key itself for meta keys) and name. ok is false for a
// key outside the layout.
func splitKey(key string) (kind, name string, ok bool) {
	switch key {
	case KeyTerm, KeyLeader, KeyLeaseRecord, KeyName:
		return key, "", true
	}
	for _, p := range []string{PrefixRegions, PrefixNodes, PrefixTenants, PrefixQuotas, PrefixFarTenants, PrefixFarNodes} {
		if rest, found := strings.CutPrefix(key, p); found && ValidName(rest) {
			return p, rest, true
		}
	}
	return "", "", false
}
