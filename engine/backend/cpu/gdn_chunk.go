package cpu

import "math"

// chunkScratch holds a head's chunk temporaries (reused across chunks and
// tasks of one worker).
type chunkScratch struct {
	gc, eg, A, P       []float32 // C; C; C×C (A+I, rows); C×C (decayed q·k)
	bvT, bkT, vnT, kdT []float32 // dv×C, dk×C, dv×C, dk×C (transposed)
	w                  []float32 // C×dk
}

// chunked is the chunked (WY) form of the gated delta rule, as transformers'
// torch reference computes prefill: within a chunk of C tokens the
// delta-rule corrections are solved as a unit-lower-triangular system, so
// the state is read and written once per chunk, and everything is dot
// products (the same work a GPU does as matrix multiplies). A shorter last
// chunk is the same as transformers' zero padding (padded tokens have k = 0,
// g = 0).
func (hd *gdnHead) chunked(C int) {
	dk, dv, ST := hd.dk, hd.dv, hd.st
	s := &hd.ck
	s.gc, s.eg = grow(s.gc, C), grow(s.eg, C)
	s.A, s.P = grow(s.A, C*C), grow(s.P, C*C)
	s.bvT, s.vnT = grow(s.bvT, dv*C), grow(s.vnT, dv*C)
	s.bkT, s.kdT = grow(s.bkT, dk*C), grow(s.kdT, dk*C)
	s.w = grow(s.w, C*dk)
	for c0 := 0; c0 < hd.n; c0 += C {
		L := min(C, hd.n-c0)
		q, k := hd.q[c0*dk:(c0+L)*dk], hd.k[c0*dk:(c0+L)*dk]
		v, beta := hd.v[c0*dv:(c0+L)*dv], hd.beta[c0:c0+L]
		gc, eg, A, P := s.gc, s.eg, s.A, s.P
		var acc float32
		for i := 0; i < L; i++ {
			acc += hd.g[c0+i]
			gc[i] = acc
			eg[i] = float32(math.Exp(float64(acc)))
		}
		// A = −(βk·kᵀ ⊙ decay) strictly lower, P = q·kᵀ ⊙ decay (j ≤ i).
		for i := 0; i < L; i++ {
			ki, qi := k[i*dk:(i+1)*dk], q[i*dk:(i+1)*dk]
			for j := 0; j <= i; j++ {
				dec := float32(math.Exp(float64(gc[i] - gc[j])))
				kj := k[j*dk : (j+1)*dk]
				if j < i {
					A[i*C+j] = -beta[i] * dot(ki, kj) * dec
				}
				P[i*C+j] = dot(qi, kj) * dec
			}
		}
		// Forward substitution: row i += Σ_m row_i[m]·(updated row m).
		for i := 1; i < L; i++ {
			for j := 0; j < i; j++ {
				var sum float32
				for m := j + 1; m < i; m++ {
					sum += A[i*C+m] * A[m*C+j]
				}
				A[i*C+j] += sum
			}
		}
		// The substitution reads row i's old values only at m > j, which the
		// ascending j loop has not overwritten yet. Add the identity.
		for i := 0; i < L; i++ {
			A[i*C+i] = 1
		}
		for j := 0; j < L; j++ {
			for y := 0; y < dv; y++ {
				s.bvT[y*C+j] = beta[j] * v[j*dv+y]
			}
			for x := 0; x < dk; x++ {
				s.bkT[x*C+j] = beta[j] * eg[j] * k[j*dk+x]
			}
		}
		// W = (A+I)·(βk·exp(gc)); v_new = (A+I)·(βv) − W·S.
		for i := 0; i < L; i++ {
			ai := A[i*C : i*C+i+1]
			w := s.w[i*dk : (i+1)*dk]
			for x := 0; x < dk; x++ {
				w[x] = dot(ai, s.bkT[x*C:x*C+i+1])
			}
			for y := 0; y < dv; y++ {
				s.vnT[y*C+i] = dot(ai, s.bvT[y*C:y*C+i+1]) - dot(w, ST[y*dk:(y+1)*dk])
			}
		}
		// out_i = exp(gc_i)·(Sᵀq_i) + Σ_{j≤i} P[i][j]·v_new_j.
		for i := 0; i < L; i++ {
			qi, pi := q[i*dk:(i+1)*dk], P[i*C:i*C+i+1]
			o := hd.out[(c0+i)*dv : (c0+i+1)*dv]
			for y := 0; y < dv; y++ {
				o[y] = eg[i]*dot(qi, ST[y*dk:(y+1)*dk]) + dot(pi, s.vnT[y*C:y*C+i+1])
			}
		}
		// S ← exp(gc_last)·S + Σ_j (k_j·exp(gc_last − gc_j)) ⊗ v_new_j.
		last := gc[L-1]
		for j := 0; j < L; j++ {
			e := float32(math.Exp(float64(last - gc[j])))
			for x := 0; x < dk; x++ {
				s.kdT[x*C+j] = k[j*dk+x] * e
			}
		}
		el := eg[L-1]
		for y := 0; y < dv; y++ {
			row, vy := ST[y*dk:(y+1)*dk], s.vnT[y*C:y*C+L]
			for x := range row {
				row[x] = el*row[x] + dot(vy, s.kdT[x*C:x*C+L])
			}
		}
	}
}
