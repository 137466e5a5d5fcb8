package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
	"github.com/infernix/infernix/kernels"
)

// TestKernelsCompile compiles every module for sm_90 (and the attention
// modules for the head sizes the models use) wherever NVRTC is installed.
// NVRTC needs no GPU, so this checks the kernels' syntax and resource use on
// build machines with the CUDA toolkit; elsewhere it skips.
func TestKernelsCompile(t *testing.T) {
	rtc, err := driver.LoadNVRTC()
	if errors.Is(err, driver.ErrNotAvailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	arch, cubin := rtc.Target(90)
	opts := []string{"--gpu-architecture=" + arch, "--std=c++17", "-default-device"}
	if os.Getenv("INFERNIX_PTXAS_VERBOSE") != "" {
		opts = append(opts, "--ptxas-options=-v")
	}
	type job struct {
		mod  string
		defs []string
	}
	var jobs []job
	for _, m := range kernels.Modules {
		switch m {
		case "attention.cu", "prefill.cu":
			for _, hd := range []int{64, 128} {
				for _, g := range []int{1, 2, 4, 8, 16} {
					jobs = append(jobs, job{m, []string{fmt.Sprintf("HD=%d", hd), fmt.Sprintf("G=%d", g)}})
				}
			}
			if m == "attention.cu" {
				jobs = append(jobs, job{m, []string{"HD=256", "G=8"}}, job{m, []string{"HD=16", "G=2"}}, job{m, []string{"HD=40", "G=4"}}, job{m, []string{"HD=128", "G=3"}}, job{m, []string{"HD=8", "G=1"}})
				// INFERNIX_CUDA_PDL_TRIGGER's late placement.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "PDL_TRIGGER=1"}}, job{m, []string{"HD=128", "G=4", kvF16.define(), "DM_UNROLL=8"}})
				// The block timeline (run.sh group attntime).
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_TIMING=1"}})
				// The K/V tiles' L2 prefetch size (CP_L2PF, run 35).
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "CP_L2PF=256"}}, job{m, []string{"HD=128", "G=4", kvF16.define(), "CP_L2PF=128", "LD_L2PF=256"}})
				// The units handed out (INFERNIX_CUDA_ATTN_DYN), timed too,
				// and where G > 8 keeps the static splits.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_DYN=1"}}, job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_DYN=1", "ATTN_TIMING=1"}},
					job{m, []string{"HD=64", "G=8", "ATTN_DYN=1"}}, job{m, []string{"HD=128", "G=16", "ATTN_DYN=1"}})
				// A block's units into one partial (INFERNIX_CUDA_ATTN_ACC), timed too.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_DYN=1", "ATTN_ACC=1"}},
					job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_DYN=1", "ATTN_ACC=1", "ATTN_TIMING=1"}})
				// The metadata kept in L2 and the merge's loads ahead of the
				// position (KEEP_META, MS_SPEC; 2 and 1 by default), other
				// settings and the plain loads, with the timeline too.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "KEEP_META=1", "MS_SPEC=1"}},
					job{m, []string{"HD=128", "G=4", kvF16.define(), "KEEP_META=1", "MS_SPEC=1", "ATTN_TIMING=1"}},
					job{m, []string{"HD=64", "G=8", "KEEP_META=1"}}, job{m, []string{"HD=128", "G=4", kvF16.define(), "KEEP_META=0", "MS_SPEC=0"}}, job{m, []string{"HD=128", "G=2", "KEEP_META=0"}})
				// The step timeline (run.sh group steptime).
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "STEP_TIMING=1"}}, job{m, []string{"HD=128", "G=4", kvF16.define(), "STEP_TIMING=2"}})
				// The fold's opt-in placements (ATTN_EARLY, DEFER_LATE,
				// MS_TRIGGER), timed.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "ATTN_EARLY=1", "DEFER_LATE=1", "MS_TRIGGER=0", "STEP_TIMING=1"}})
				// attn_oproj's timing probes (OP_NOMERGE, OP_NOTAIL), timed.
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", kvF16.define(), "OP_NOMERGE=1", "OP_NOTAIL=1", "STEP_TIMING=2"}})
			} else {
				jobs = append(jobs, job{m, []string{"HD=16", "G=2"}}, job{m, []string{"HD=32", "G=4"}})
			}
			// The f16 KV cache (INFERNIX_CUDA_KV=f16) at the shapes the
			// models use and the odd ones.
			for _, d := range [][]string{{"HD=128", "G=4"}, {"HD=128", "G=2"}, {"HD=64", "G=8"}, {"HD=64", "G=1"}, {"HD=16", "G=2"}} {
				jobs = append(jobs, job{m, append(d, kvF16.define())})
			}
			if m == "attention.cu" {
				jobs = append(jobs, job{m, []string{"HD=256", "G=8", kvF16.define()}}, job{m, []string{"HD=40", "G=4", kvF16.define()}})
			} else { // 128-row tiles (INFERNIX_CUDA_PREFILL_ROWS=128)
				jobs = append(jobs, job{m, []string{"HD=128", "G=4", "PF_ROWS=128"}}, job{m, []string{"HD=64", "G=16", "PF_ROWS=128"}},
					job{m, []string{"HD=128", "G=2", kvF16.define(), "PF_ROWS=128"}})
			}
		case "gemv.cu":
			jobs = append(jobs, job{m, nil}, job{m, []string{"PDL_TRIGGER=1"}}, job{m, []string{"GF_L2PF=1"}}, job{m, []string{"GF_TIMING=1"}}, job{m, []string{"LD_L2PF=256"}}, job{m, []string{"GF_XSH=1"}},
				job{m, []string{"STEP_TIMING=1"}}, job{m, []string{"STEP_TIMING=2"}})
			// The fused products' variants (gemvf_variant.go) the bench measures.
			// INFERNIX_COMPILE_GEMVF="GF_MINB=6;GF_KSS=2": others too
			// (with INFERNIX_PTXAS_VERBOSE, their registers and spills).
			specs := benchGemvfVariants
			if e := os.Getenv("INFERNIX_COMPILE_GEMVF"); e != "" {
				specs = append(specs[:len(specs):len(specs)], strings.Split(e, ";")...)
			}
			for _, spec := range specs {
				v, err := parseGemvfVariant(spec)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, job{m, v.defs})
			}
		case "probe.cu":
			for _, v := range readPeakVariants {
				jobs = append(jobs, job{m, v.defs})
			}
		case "pchain.cu":
			// The bench's variants (pchain_test.go).
			for _, v := range pchainVariants {
				jobs = append(jobs, job{m, v.defs})
			}
		case "mlp.cu":
			// The scalar reductions (MLP_RED4=0) and a shorter ring.
			jobs = append(jobs, job{m, []string{"MLP_RED4=0"}}, job{m, []string{"MLP_RED4=0", "MLP_U=16"}}, job{m, []string{"MLP_RED4=0", "MLP_U=4", "MLP_MAXT=1024"}}, job{m, []string{"MLP_RED4=0", "MLP_NORED=1"}})
			jobs = append(jobs, job{m, nil}, job{m, []string{"STEP_TIMING=1"}}, job{m, []string{"STEP_TIMING=2"}})
		case "sample.cu":
			// BenchmarkSampleRows' builds, and the default's below.
			for _, v := range sampleVariants[1:] {
				jobs = append(jobs, job{m, v.defines})
			}
			fallthrough
		default:
			jobs = append(jobs, job{m, nil}, job{m, []string{"STEP_TIMING=1"}}, job{m, []string{"STEP_TIMING=2"}})
		}
	}
	for _, j := range jobs {
		j := j
		t.Run(fmt.Sprintf("%s%v", j.mod, j.defs), func(t *testing.T) {
			t.Parallel()
			if rtc.Major < 12 && (slices.Contains(j.defs, "GF_TMA=1") || j.mod == "mlp.cu" && !slices.Contains(j.defs, "MLP_RED4=0")) {
				// Bulk copies are PTX 8.0 (CUDA 12), vector reductions 8.1:
				// an older NVRTC checks
				// the C++ and writes PTX (for the virtual architecture, so
				// that its ptxas, which would refuse it, does not run).
				o := append([]string{"--gpu-architecture=compute_90"}, opts[1:]...)
				compileJob(t, rtc, j.mod, j.defs, o, false)
				return
			}
			compileJob(t, rtc, j.mod, j.defs, opts, cubin)
		})
	}
}

func compileJob(t *testing.T, rtc *driver.NVRTC, mod string, defs, opts []string, cubin bool) {
	j := struct {
		mod  string
		defs []string
	}{mod, defs}
	{
		src, err := kernels.Source(j.mod)
		if err != nil {
			t.Fatal(err)
		}
		o := append([]string(nil), opts...)
		for _, d := range j.defs {
			o = append(o, "-D"+d)
		}
		_, log, err := rtc.Compile(src, j.mod, o, cubin)
		if err != nil {
			t.Errorf("%s %v: %v", j.mod, j.defs, err)
			return
		}
		// INFERNIX_DUMP_PTX=DIR: the PTX of every job, for reading the
		// code a kernel compiles to.
		if dir := os.Getenv("INFERNIX_DUMP_PTX"); dir != "" {
			if ptx, _, err := rtc.Compile(src, j.mod, o, false); err == nil {
				name := strings.NewReplacer("=", "", " ", "_", "[", "", "]", "").Replace(fmt.Sprintf("%s%v.ptx", j.mod, j.defs))
				os.WriteFile(filepath.Join(dir, name), ptx, 0o644) //nolint:errcheck // a debugging aid
			}
		}
		fn := ""
		for _, line := range strings.Split(log, "\n") {
			if i := strings.Index(line, "entry function '"); i >= 0 {
				fn, _, _ = strings.Cut(line[i+len("entry function '"):], "'")
			}
			if strings.Contains(line, "spill") && !strings.Contains(line, " 0 bytes spill stores") {
				t.Logf("%s %v %s: %s", j.mod, j.defs, fn, strings.TrimSpace(line))
			}
			if os.Getenv("INFERNIX_PTXAS_VERBOSE") != "" && strings.Contains(line, "Used") {
				t.Logf("%s %v %s: %s", j.mod, j.defs, fn, strings.TrimSpace(line))
			}
		}
		if strings.Contains(log, "warning") {
			t.Logf("%s %v warnings:\n%s", j.mod, j.defs, log)
		}
	}
}
