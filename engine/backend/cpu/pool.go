package cpu

import "sync"

// pool runs parallel-for loops on a fixed set of goroutines, so that a forward
// pass does not spawn goroutines per operator.
type pool struct {
	n    int
	jobs chan job
}

type job struct {
	fn     func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

func newPool(n int) *pool {
	p := &pool{n: n, jobs: make(chan job, n*4)}
	for i := 0; i < n; i++ {
		go func() {
			for j := range p.jobs {
				j.fn(j.lo, j.hi)
				j.wg.Done()
			}
		}()
	}
	return p
}

// parallel splits [0, n) into chunks of at least grain items and runs fn on
// them across the pool, returning when all are done.
func (p *pool) parallel(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := p.n * 4
	if max := (n + grain - 1) / grain; chunks > max {
		chunks = max
	}
	if chunks <= 1 || p.n == 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	size := (n + chunks - 1) / chunks
	for lo := size; lo < n; lo += size {
		hi := lo + size
		if hi > n {
			hi = n
		}
		wg.Add(1)
		p.jobs <- job{fn: fn, lo: lo, hi: hi, wg: &wg}
	}
	fn(0, min(size, n))
	wg.Wait()
}
