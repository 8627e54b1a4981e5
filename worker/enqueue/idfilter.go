package enqueue

import "hash/maphash"

// idFilter remembers the record ids an enqueue has read, in bounded memory,
// for the duplicate check across chunks: a Bloom filter, so "not seen" is
// certain and "maybe seen" is settled by asking the database for the few
// ids it names. It grows by layers (each twice the last) while it fills, up
// to idFilterMaxBytes; past that the last layer only grows fuller, which
// makes more ids "maybe" (more look-ups), never a wrong answer.
type idFilter struct {
	seed   maphash.Seed
	layers []idLayer
	bytes  int
}

type idLayer struct {
	bits []uint64
	n    int // ids added
	cap  int // ids this layer takes before the next is added
}

const (
	// idFilterFirstBytes is the first layer's size: 64 KiB, 32,768 ids.
	idFilterFirstBytes = 64 << 10
	// idFilterMaxBytes bounds the filter: 64 MiB holds about 32 million ids
	// at under 0.3 % false "maybe"s per layer.
	idFilterMaxBytes = 64 << 20
	// idFilterBitsPerID: 16 bits an id with idFilterProbes probes is a false
	// "maybe" rate of about 0.24 % per layer.
	idFilterBitsPerID = 16
	idFilterProbes    = 4
)

func newIDFilter() *idFilter {
	f := &idFilter{seed: maphash.MakeSeed()}
	f.grow(idFilterFirstBytes)
	return f
}

func (f *idFilter) grow(size int) {
	f.layers = append(f.layers, idLayer{bits: make([]uint64, size/8), cap: size * 8 / idFilterBitsPerID})
	f.bytes += size
}

// add records id; mayContain reports whether id may have been added before
// (false: certainly not).
func (f *idFilter) add(id string) {
	last := &f.layers[len(f.layers)-1]
	if last.n >= last.cap && f.bytes+2*len(last.bits)*8 <= idFilterMaxBytes {
		f.grow(2 * len(last.bits) * 8)
		last = &f.layers[len(f.layers)-1]
	}
	h := maphash.String(f.seed, id)
	last.set(h)
	last.n++
}

func (f *idFilter) mayContain(id string) bool {
	h := maphash.String(f.seed, id)
	for i := range f.layers {
		if f.layers[i].has(h) {
			return true
		}
	}
	return false
}

// probe derives idFilterProbes bit positions from one 64-bit hash
// (Kirsch and Mitzenmacher: h1 + i*h2).
func (l *idLayer) probe(h uint64, i int) (word int, mask uint64) {
	h1, h2 := h&0xffffffff, h>>32|1
	bit := (h1 + uint64(i)*h2) % uint64(len(l.bits)*64)
	return int(bit / 64), 1 << (bit % 64)
}

func (l *idLayer) set(h uint64) {
	for i := range idFilterProbes {
		w, m := l.probe(h, i)
		l.bits[w] |= m
	}
}

func (l *idLayer) has(h uint64) bool {
	for i := range idFilterProbes {
		w, m := l.probe(h, i)
		if l.bits[w]&m == 0 {
			return false
		}
	}
	return true
}
