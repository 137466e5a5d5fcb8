package sample

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The exponentials of a full-vocabulary draw (temperature alone, top-p,
// min-p: 152K per token for Qwen) take ~1 ms on one core, which a GPU
// decode step of ~5 ms cannot hide: the host samples between steps. Large
// vocabularies are therefore cut into fixed chunks that idle cores share.
// The chunks' sums are added in chunk order, so a draw depends on neither
// the number of cores nor the order in which chunks finish.
const (
	parallelMinVocab = 1 << 16 // below this one core is quicker than a hand-over
	expChunk         = 1 << 14
)

// expPool is the process's helpers: GOMAXPROCS-1 goroutines (at the first
// large sampler), fed pointers to a Sampler's chunkWork.
var expPool struct {
	once    sync.Once
	workers int
	ch      chan *chunkWork
}

func startExpPool() {
	expPool.workers = runtime.GOMAXPROCS(0) - 1
	if expPool.workers <= 0 {
		return
	}
	expPool.ch = make(chan *chunkWork, 4*expPool.workers)
	for range expPool.workers {
		go func() {
			for cw := range expPool.ch {
				cw.run()
				cw.wg.Done()
			}
		}()
	}
}

// chunkWork is one exp pass split into chunks; a Sampler owns one, so
// dispatching allocates nothing.
type chunkWork struct {
	next atomic.Int32
	wg   sync.WaitGroup

	w                    []float32
	m, invT, floor, wmin float32
	sum, sumMin          []float64 // per chunk
	chunks               int32
	hist                 bool      // this pass fills the top-p histograms, not the weights
	hists                []float64 // per chunk, pBins each (samplers with top-p)
}

// run takes chunks until none is left.
func (cw *chunkWork) run() {
	for {
		c := int(cw.next.Add(1) - 1)
		if c >= int(cw.chunks) {
			return
		}
		lo := c * expChunk
		hi := min(lo+expChunk, len(cw.w))
		if cw.hist {
			h := cw.hists[c*pBins : (c+1)*pBins : (c+1)*pBins]
			clear(h)
			for _, e := range cw.w[lo:hi] {
				h[weightBin(e)] += float64(e)
			}
			continue
		}
		cw.sum[c], cw.sumMin[c] = expWeights(cw.w[lo:hi], cw.m, cw.invT, cw.floor, cw.wmin)
	}
}

// dispatch runs one pass over w's chunks on this goroutine and idle
// helpers, and returns the number of chunks.
func (cw *chunkWork) dispatch(w []float32, hist bool) int {
	n := (len(w) + expChunk - 1) / expChunk
	cw.w, cw.hist, cw.chunks = w, hist, int32(n)
	cw.next.Store(0)
	for range min(expPool.workers, n-1) {
		cw.wg.Add(1)
		select {
		case expPool.ch <- cw:
		default: // every helper busy: this goroutine does the rest
			cw.wg.Done()
		}
	}
	cw.run()
	cw.wg.Wait()
	cw.w = nil
	return n
}

// histogram fills hist (pBins bins) with w's weight per top-p bin: the
// chunks' histograms added in chunk order. Only for a chunkWork made with
// topP.
func (cw *chunkWork) histogram(w []float32, hist []float64) {
	n := cw.dispatch(w, true)
	clear(hist)
	for c := range n {
		for b, v := range cw.hists[c*pBins : (c+1)*pBins] {
			hist[b] += v
		}
	}
}

// newChunkWork returns the chunked passes for a vocabulary (with topP the
// top-p histogram's too), or nil where they would not pay (a small
// vocabulary, one core).
func newChunkWork(vocab int, topP bool) *chunkWork {
	if vocab < parallelMinVocab {
		return nil
	}
	expPool.once.Do(startExpPool)
	if expPool.workers <= 0 {
		return nil
	}
	n := (vocab + expChunk - 1) / expChunk
	cw := &chunkWork{sum: make([]float64, n), sumMin: make([]float64, n)}
	if topP {
		cw.hists = make([]float64, n*pBins)
	}
	return cw
}

// expWeights is the package's expWeights over w with idle cores helping: the same
// weights, and sums added chunk by chunk in order.
func (cw *chunkWork) expWeights(w []float32, m, invT, floor, wmin float32) (sum, sumMin float64) {
	cw.m, cw.invT, cw.floor, cw.wmin = m, invT, floor, wmin
	n := cw.dispatch(w, false)
	for c := range n {
		sum += cw.sum[c]
		sumMin += cw.sumMin[c]
	}
	return sum, sumMin
}
