package hnsw

// item is a node slot and its distance to the query.
type item struct {
	d    float32
	slot uint32
}

// minHeap keeps the nearest item at the root.
type minHeap []item

func (h *minHeap) push(x item) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].d <= s[i].d {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *minHeap) pop() item {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s[r].d < s[l].d {
			c = r
		}
		if s[i].d <= s[c].d {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	return top
}

// maxHeap keeps the farthest item at the root.
type maxHeap []item

func (h *maxHeap) push(x item) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].d >= s[i].d {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *maxHeap) pop() item {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s[r].d > s[l].d {
			c = r
		}
		if s[i].d >= s[c].d {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	return top
}

// rankHeap keeps the k best items of an exhaustive scan, ranked by
// distance and then by id, so that ties are settled as the answer
// settles them. Its root is the worst item kept.
type rankHeap struct {
	ids   []int64 // by slot
	items []item
}

// worse reports whether a ranks after b.
func (h *rankHeap) worse(a, b item) bool {
	if a.d != b.d {
		return a.d > b.d
	}
	return h.ids[a.slot] > h.ids[b.slot]
}

// keep adds it if fewer than k are kept or it ranks before the worst.
func (h *rankHeap) keep(it item, k int) {
	s := h.items
	if len(s) < k {
		s = append(s, it)
		for i := len(s) - 1; i > 0; {
			p := (i - 1) / 2
			if !h.worse(s[i], s[p]) {
				break
			}
			s[p], s[i] = s[i], s[p]
			i = p
		}
		h.items = s
		return
	}
	if !h.worse(s[0], it) {
		return
	}
	s[0] = it
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			return
		}
		c := l
		if r := l + 1; r < len(s) && h.worse(s[r], s[l]) {
			c = r
		}
		if !h.worse(s[c], s[i]) {
			return
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
}
