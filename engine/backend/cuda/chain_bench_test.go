package cuda

import (
	"fmt"
	"math"
	"os"
	"testing"
)

// TestChainBench (INFERNIX_BENCH_CHAIN=1, on the GPU; results as JSON to
// $INFERNIX_BENCH_OUT) times the decode products of Qwen3-8B (36 layers
// and the LM head, prodBench) as one graph, ordered two ways: by PDL as
// decode orders them (trigger at exit, PDL_WAIT) and by the launch chain
// (kernels/prelude.cuh chain_enter) with a few sleeps between thread 0's
// polls. Every replay starts from the same residual stream, so the LM
// head's outputs must be bit-identical whatever the ordering: a launch
// that read its input before it was written, or a grid that overwrote
// what the one before it still read, would change them.
// chainLate is kernels/prelude.cuh CHAIN_LATE: a chained launch lets the
// next one in only at exit.
const chainLate = 0x10000

func TestChainBench(t *testing.T) {
	if os.Getenv("INFERNIX_BENCH_CHAIN") == "" {
		t.Skip("set INFERNIX_BENCH_CHAIN=1")
	}
	b := gpu(t)
	pb := newProdBench(t, b)
	defer pb.close()
	chain := pb.alloc(4)
	total := int64(pbL)*pb.layerBytes() + pb.headBytes()
	// run orders the products by the chain with thread 0 sleeping sleep ns
	// between polls, or by PDL where sleep < 0.
	run := func(sleep int) func() {
		products := pb.gemvf(true, pbL)
		return func() {
			b.memset(pb.x, pbX0, pbH)
			if sleep >= 0 {
				b.memset(chain, 0, 1)
				b.chain, b.chainTarget, b.chainSleep = chain, 0, uint32(sleep)
			}
			products()
			b.chain = 0
		}
	}
	outputs := func() []float32 {
		b.sync()
		if b.err != nil {
			t.Fatal(b.err)
		}
		return readF32(t, b, pb.outs[0], pbV)
	}
	pb.report("pdl", total, pb.graphTime(run(-1)))
	ref := outputs()
	bad := 0
	for _, v := range ref {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("the PDL-ordered products gave %d non-finite outputs of %d: no reference to compare with", bad, len(ref))
	}
	for _, s := range []int{0, 32, 128, 512} {
		name := fmt.Sprintf("chain_sleep%d", s)
		pb.report(name, total, pb.graphTime(run(s)))
		got := outputs()
		if !equalBits(got, ref) {
			diff := 0
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
					diff++
				}
			}
			t.Errorf("%s: %d of %d outputs differ from the PDL-ordered products'", name, diff, len(got))
		}
		pb.res[name+"_identical"] = equalBits(got, ref)
	}
	// The control: the chain's counter, the next launch let in at exit as
	// PDL lets it (chainLate).
	pb.report("chain_late_sleep32", total, pb.graphTime(run(32|chainLate)))
	if got := outputs(); !equalBits(got, ref) {
		t.Errorf("chain_late_sleep32: outputs differ from the PDL-ordered products'")
	}
	pb.report("pdl_again", total, pb.graphTime(run(-1)))
	if got := outputs(); !equalBits(got, ref) {
		t.Errorf("the PDL-ordered products changed between runs")
	}
	pb.writeJSON()
}
