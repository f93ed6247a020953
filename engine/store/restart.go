package store

// Restart is the position an image at pos takes to start a new history
// when it is restored in place of a file that went as far as floor: a
// seq past both floor and pos.Seq — so no change cursor the old file gave
// is one the restored file continues (a cursor at or before it is older
// than what the file keeps) — and pos's lineage with a new random history
// from pos.Seq, where the image's data ends: write s of the old file's
// history past pos.Seq is on no history the restored file holds.
func Restart(pos Position, floor uint64) Position {
	lineage := append(append([]LineageEntry(nil), pos.Lineage...), LineageEntry{History: newHistory(), From: pos.Seq})
	return Position{Seq: max(pos.Seq, floor) + 1, Lineage: lineage}
}
