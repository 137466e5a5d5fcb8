package driver

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Handles of the driver API. They are opaque pointers (DevPtr is an address
// in device memory).
type (
	Device    int32
	Context   uintptr
	Stream    uintptr
	Module    uintptr
	Function  uintptr
	Event     uintptr
	Graph     uintptr
	GraphExec uintptr
	DevPtr    uint64
)

// Device attributes (CUdevice_attribute).
const (
	AttrMaxThreadsPerBlock      = 1
	AttrMaxSharedPerBlock       = 8
	AttrMultiprocessorCount     = 16
	AttrL2CacheSize             = 38
	AttrComputeCapabilityMajor  = 75
	AttrComputeCapabilityMinor  = 76
	AttrMaxSharedPerBlockOptin  = 97
	AttrMaxSharedPerSM          = 81
	FuncAttrMaxDynamicShared    = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	FuncAttrNumRegs             = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
	FuncAttrSharedSizeBytes     = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static)
	FuncAttrLocalSizeBytes      = 3 // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	StreamNonBlocking           = 1
	CaptureModeThreadLocal      = 1
	EventDefault                = 0
	maxKernelParams             = 32
	CaptureStatusNone           = 0
	CaptureStatusActive         = 1
	CaptureStatusInvalidated    = 2
	graphInstantiateFlagDefault = 0
)

// Driver is the opened libcuda with cuInit done.
type Driver struct {
	lib     *library
	version int
	ex      *executor

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName    uintptr
	cuDeviceGetAttribute, cuDeviceTotalMem, cuDevicePrimaryCtxRetain              uintptr
	cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuCtxSynchronize                  uintptr
	cuMemAlloc, cuMemFree, cuMemAllocHost, cuMemFreeHost, cuMemGetInfo            uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                       uintptr
	cuMemsetD32Async, cuMemsetD8Async                                             uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction                         uintptr
	cuFuncSetAttribute, cuFuncGetAttribute, cuLaunchKernel                        uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize                          uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing                 uintptr
	cuGraphInstantiate, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy         uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsed, cuEventDest uintptr
	cuGetErrorName, cuGetErrorString                                              uintptr
	cuCtxGetCurrent, cuMemcpyHtoD                                                 uintptr
	cuProfilerStart, cuProfilerStop                                               uintptr
	cuLaunchKernelEx                                                              uintptr
	cuModuleGetGlobal                                                             uintptr
	cuOccupancyMaxActiveClusters                                                  uintptr
}

// LoadDriver opens libcuda.so.1 and initialises it. A missing library, a
// missing symbol or a failing cuInit (no device, no driver) is reported as
// ErrNotAvailable.
func LoadDriver() (*Driver, error) {
	lib, err := open("libcuda", []string{"libcuda.so.1", "libcuda.so"}, []string{"libcuda.so.1", "libcuda.so"}, nil)
	if err != nil {
		return nil, notAvailable(err)
	}
	d := &Driver{lib: lib, ex: newExecutor()}
	if err := lib.syms(map[string]*uintptr{
		"cuInit": &d.cuInit, "cuDriverGetVersion": &d.cuDriverGetVersion, "cuDeviceGetCount": &d.cuDeviceGetCount,
		"cuDeviceGet": &d.cuDeviceGet, "cuDeviceGetName": &d.cuDeviceGetName, "cuDeviceGetAttribute": &d.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2": &d.cuDeviceTotalMem, "cuDevicePrimaryCtxRetain": &d.cuDevicePrimaryCtxRetain,
		"cuDevicePrimaryCtxRelease_v2": &d.cuDevicePrimaryCtxRelease, "cuCtxSetCurrent": &d.cuCtxSetCurrent,
		"cuCtxSynchronize": &d.cuCtxSynchronize, "cuMemAlloc_v2": &d.cuMemAlloc, "cuMemFree_v2": &d.cuMemFree,
		"cuMemAllocHost_v2": &d.cuMemAllocHost, "cuMemFreeHost": &d.cuMemFreeHost, "cuMemGetInfo_v2": &d.cuMemGetInfo,
		"cuMemcpyHtoDAsync_v2": &d.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &d.cuMemcpyDtoHAsync,
		"cuMemcpyDtoDAsync_v2": &d.cuMemcpyDtoDAsync, "cuMemsetD32Async": &d.cuMemsetD32Async,
		"cuMemsetD8Async": &d.cuMemsetD8Async, "cuModuleLoadData": &d.cuModuleLoadData, "cuModuleUnload": &d.cuModuleUnload,
		"cuModuleGetFunction": &d.cuModuleGetFunction, "cuFuncSetAttribute": &d.cuFuncSetAttribute,
		"cuFuncGetAttribute": &d.cuFuncGetAttribute, "cuLaunchKernel": &d.cuLaunchKernel,
		"cuStreamCreate": &d.cuStreamCreate, "cuStreamDestroy_v2": &d.cuStreamDestroy,
		"cuStreamSynchronize": &d.cuStreamSynchronize, "cuGetErrorName": &d.cuGetErrorName,
		"cuGetErrorString": &d.cuGetErrorString,
	}); err != nil {
		return nil, notAvailable(err)
	}
	// Graphs and events are optional: without them the backend runs eagerly.
	d.cuStreamBeginCapture = lib.optSym("cuStreamBeginCapture_v2")
	d.cuStreamEndCapture = lib.optSym("cuStreamEndCapture")
	d.cuStreamIsCapturing = lib.optSym("cuStreamIsCapturing")
	d.cuGraphInstantiate = lib.optSym("cuGraphInstantiateWithFlags")
	d.cuGraphLaunch = lib.optSym("cuGraphLaunch")
	d.cuGraphExecDestroy = lib.optSym("cuGraphExecDestroy")
	d.cuGraphDestroy = lib.optSym("cuGraphDestroy")
	d.cuEventCreate = lib.optSym("cuEventCreate")
	d.cuEventRecord = lib.optSym("cuEventRecord")
	d.cuEventSynchronize = lib.optSym("cuEventSynchronize")
	d.cuEventElapsed = lib.optSym("cuEventElapsedTime")
	d.cuEventDest = lib.optSym("cuEventDestroy_v2")
	d.cuCtxGetCurrent = lib.optSym("cuCtxGetCurrent")
	d.cuMemcpyHtoD = lib.optSym("cuMemcpyHtoD_v2")
	d.cuProfilerStart = lib.optSym("cuProfilerStart")
	d.cuProfilerStop = lib.optSym("cuProfilerStop")
	d.cuLaunchKernelEx = lib.optSym("cuLaunchKernelEx")
	d.cuModuleGetGlobal = lib.optSym("cuModuleGetGlobal_v2")
	d.cuOccupancyMaxActiveClusters = lib.optSym("cuOccupancyMaxActiveClusters")
	if err := d.check("cuInit", d.cuInit, 0); err != nil {
		return nil, notAvailable(err)
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); err != nil {
		return nil, notAvailable(err)
	}
	d.version = int(v)
	return d, nil
}

// Path is the library file that was opened.
func (d *Driver) Path() string { return d.lib.path }

// Version is the driver's CUDA version (e.g. 13000 for 13.0).
func (d *Driver) Version() int { return d.version }

// HasGraphs reports whether stream capture and graph launch are available.
func (d *Driver) HasGraphs() bool {
	return d.cuStreamBeginCapture != 0 && d.cuStreamEndCapture != 0 && d.cuGraphInstantiate != 0 &&
		d.cuGraphLaunch != 0 && d.cuGraphExecDestroy != 0 && d.cuGraphDestroy != 0 && d.cuStreamIsCapturing != 0
}

// HasEvents reports whether timing events are available.
func (d *Driver) HasEvents() bool {
	return d.cuEventCreate != 0 && d.cuEventRecord != 0 && d.cuEventSynchronize != 0 && d.cuEventElapsed != 0 && d.cuEventDest != 0
}

// check calls fn on the device thread and turns a non-zero CUresult into an
// *Error named call.
//
//go:uintptrescapes
func (d *Driver) check(call string, fn uintptr, args ...uintptr) error {
	r := d.ex.call(fn, args...)
	if c := status(r); c != 0 {
		return d.err(call, c)
	}
	return nil
}

func (d *Driver) err(call string, code int) error {
	e := &Error{Call: call, Code: code, Name: fmt.Sprintf("CUresult %d", code)}
	var p uintptr
	if d.cuGetErrorName != 0 {
		if r, _, _ := purego.SyscallN(d.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))); status(r) == 0 && p != 0 {
			e.Name = cString(p)
		}
	}
	p = 0
	if d.cuGetErrorString != 0 {
		if r, _, _ := purego.SyscallN(d.cuGetErrorString, uintptr(code), uintptr(unsafe.Pointer(&p))); status(r) == 0 && p != 0 {
			e.Msg = cString(p)
		}
	}
	return e
}

// DeviceCount is the number of CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	err := d.check("cuDeviceGetCount", d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

// Device returns the device of ordinal i.
func (d *Driver) Device(i int) (Device, error) {
	var dev int32
	err := d.check("cuDeviceGet", d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(i))
	return Device(dev), err
}

// DeviceName is the marketing name ("NVIDIA H200").
func (d *Driver) DeviceName(dev Device) (string, error) {
	buf := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev)); err != nil {
		return "", err
	}
	for i, c := range buf {
		if c == 0 {
			return string(buf[:i]), nil
		}
	}
	return string(buf), nil
}

// Attr reads a device attribute.
func (d *Driver) Attr(dev Device, attr int) (int, error) {
	var v int32
	err := d.check(fmt.Sprintf("cuDeviceGetAttribute(%d)", attr), d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(dev))
	return int(v), err
}

// TotalMem is the device's memory in bytes.
func (d *Driver) TotalMem(dev Device) (uint64, error) {
	var n uint64
	err := d.check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(dev))
	return n, err
}

// PrimaryCtxRetain returns the device's primary context (the one the CUDA
// runtime and PyTorch share), retaining it.
func (d *Driver) PrimaryCtxRetain(dev Device) (Context, error) {
	var c Context
	err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c)), uintptr(dev))
	return c, err
}

// PrimaryCtxRelease releases a retained primary context.
func (d *Driver) PrimaryCtxRelease(dev Device) error {
	return d.check("cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease, uintptr(dev))
}

// SetCurrent binds ctx to the calling OS thread.
func (d *Driver) SetCurrent(c Context) error {
	return d.check("cuCtxSetCurrent", d.cuCtxSetCurrent, uintptr(c))
}

// CurrentCtx is the calling thread's current context (0 if none or unknown).
func (d *Driver) CurrentCtx() Context {
	var c Context
	if d.cuCtxGetCurrent == 0 || d.check("cuCtxGetCurrent", d.cuCtxGetCurrent, uintptr(unsafe.Pointer(&c))) != nil {
		return 0
	}
	return c
}

// HtoD copies synchronously (legacy stream semantics: waits for the copy).
func (d *Driver) HtoD(dst DevPtr, src unsafe.Pointer, n uint64) error {
	if d.cuMemcpyHtoD == 0 {
		return &Error{Call: "cuMemcpyHtoD_v2", Name: "symbol missing"}
	}
	return d.check("cuMemcpyHtoD_v2", d.cuMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(n))
}

// CtxSynchronize waits for all work of the current context.
func (d *Driver) CtxSynchronize() error {
	return d.check("cuCtxSynchronize", d.cuCtxSynchronize)
}

// MemAlloc allocates n bytes of device memory (256-byte aligned).
func (d *Driver) MemAlloc(n uint64) (DevPtr, error) {
	var p DevPtr
	err := d.check(fmt.Sprintf("cuMemAlloc(%d bytes)", n), d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

// MemFree frees device memory.
func (d *Driver) MemFree(p DevPtr) error { return d.check("cuMemFree", d.cuMemFree, uintptr(p)) }

// MemAllocHost allocates n bytes of page-locked host memory, which
// asynchronous copies and captured graphs need.
func (d *Driver) MemAllocHost(n uint64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.check(fmt.Sprintf("cuMemAllocHost(%d bytes)", n), d.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

// MemFreeHost frees page-locked host memory.
func (d *Driver) MemFreeHost(p unsafe.Pointer) error {
	return d.check("cuMemFreeHost", d.cuMemFreeHost, uintptr(p))
}

// MemGetInfo returns free and total device memory of the current context's device.
func (d *Driver) MemGetInfo() (free, total uint64, err error) {
	err = d.check("cuMemGetInfo_v2", d.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return
}

// HtoDAsync copies n bytes from host src to device dst on stream s. src must
// stay valid until the copy completes unless it is pageable memory (which
// the driver stages before returning).
func (d *Driver) HtoDAsync(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) error {
	return d.check("cuMemcpyHtoDAsync", d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// DtoHAsync copies n bytes from device src to host dst on stream s.
func (d *Driver) DtoHAsync(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) error {
	return d.check("cuMemcpyDtoHAsync", d.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// DtoDAsync copies n bytes between device buffers on stream s.
func (d *Driver) DtoDAsync(dst, src DevPtr, n uint64, s Stream) error {
	return d.check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// MemsetD32Async sets n 32-bit words at dst to v.
func (d *Driver) MemsetD32Async(dst DevPtr, v uint32, n uint64, s Stream) error {
	return d.check("cuMemsetD32Async", d.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s))
}

// MemsetD8Async sets n bytes at dst to v.
func (d *Driver) MemsetD8Async(dst DevPtr, v uint8, n uint64, s Stream) error {
	return d.check("cuMemsetD8Async", d.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s))
}

// ModuleLoadData loads a cubin (or NUL-terminated PTX) image.
func (d *Driver) ModuleLoadData(image []byte) (Module, error) {
	var m Module
	err := d.check("cuModuleLoadData", d.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	return m, err
}

// ModuleUnload unloads a module.
func (d *Driver) ModuleUnload(m Module) error {
	return d.check("cuModuleUnload", d.cuModuleUnload, uintptr(m))
}

// ModuleGetFunction finds an extern "C" kernel by name.
func (d *Driver) ModuleGetFunction(m Module, name string) (Function, error) {
	var f Function
	n := cstr(name)
	err := d.check("cuModuleGetFunction("+name+")", d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&n[0])))
	return f, err
}

// ModuleGetGlobal finds a module's __device__ variable by name: its
// device address and size in bytes.
func (d *Driver) ModuleGetGlobal(m Module, name string) (DevPtr, uint64, error) {
	if d.cuModuleGetGlobal == 0 {
		return 0, 0, fmt.Errorf("cuModuleGetGlobal(%s): not in this driver", name)
	}
	var p DevPtr
	var size uint64
	n := cstr(name)
	err := d.check("cuModuleGetGlobal("+name+")", d.cuModuleGetGlobal, uintptr(unsafe.Pointer(&p)), uintptr(unsafe.Pointer(&size)),
		uintptr(m), uintptr(unsafe.Pointer(&n[0])))
	return p, size, err
}

// FuncSetAttribute sets a kernel attribute (e.g. its dynamic shared memory limit).
func (d *Driver) FuncSetAttribute(f Function, attr, v int) error {
	return d.check(fmt.Sprintf("cuFuncSetAttribute(%d)", attr), d.cuFuncSetAttribute, uintptr(f), uintptr(attr), uintptr(v))
}

// FuncGetAttribute reads a kernel attribute (registers, local memory).
func (d *Driver) FuncGetAttribute(f Function, attr int) (int, error) {
	var v int32
	err := d.check(fmt.Sprintf("cuFuncGetAttribute(%d)", attr), d.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(attr), uintptr(f))
	return int(v), err
}

// Launch enqueues kernel f on stream s. params points to an array of
// pointers, one per kernel parameter, each to the parameter's value; the
// driver copies the values before returning. The error names only the call:
// the caller adds the kernel's name.
func (d *Driver) Launch(f Function, gx, gy, gz, bx, by, bz, smem uint32, s Stream, params unsafe.Pointer) error {
	r := d.ex.call(d.cuLaunchKernel, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz),
		uintptr(bx), uintptr(by), uintptr(bz), uintptr(smem), uintptr(s), uintptr(params), 0)
	if c := status(r); c != 0 {
		return d.err("cuLaunchKernel", c)
	}
	return nil
}

// launchConfig mirrors CUlaunchConfig (cuda.h): seven unsigned ints, then
// the stream, the attribute array and its length at 8-byte alignment.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	smem                   uint32
	_                      uint32
	stream                 Stream
	attrs                  uintptr // *launchAttr
	numAttrs               uint32
	_                      uint32
}

// launchAttr mirrors CUlaunchAttribute: the id, padding to 8 bytes and the
// 64-byte value union.
type launchAttr struct {
	id  uint32
	_   uint32
	val [64]byte
}

// launchAttrProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const launchAttrProgrammaticStreamSerialization = 6

// launchAttrClusterDimension is CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
// (value: three unsigned ints).
const launchAttrClusterDimension = 4

// FuncAttrNonPortableClusterSizeAllowed is
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: clusters of more
// than 8 blocks (16 on sm_90).
const FuncAttrNonPortableClusterSizeAllowed = 14

// HasLaunchEx reports whether cuLaunchKernelEx (and so programmatic
// dependent launch) is available.
func (d *Driver) HasLaunchEx() bool { return d.cuLaunchKernelEx != 0 }

// LaunchPDL is Launch with programmatic stream serialization allowed
// (Hopper's programmatic dependent launch): the kernel may start while the
// previous kernel in the stream still runs, and must itself wait
// (griddepcontrol.wait) before using that kernel's results. It works inside
// stream capture on CUDA 12.3+ drivers. Without cuLaunchKernelEx it is
// Launch.
func (d *Driver) LaunchPDL(f Function, gx, gy, gz, bx, by, bz, smem uint32, s Stream, params unsafe.Pointer) error {
	if d.cuLaunchKernelEx == 0 {
		return d.Launch(f, gx, gy, gz, bx, by, bz, smem, s, params)
	}
	attr := &launchAttr{id: launchAttrProgrammaticStreamSerialization}
	attr.val[0] = 1 // programmaticStreamSerializationAllowed (int)
	cfg := &launchConfig{gridX: gx, gridY: gy, gridZ: gz, blockX: bx, blockY: by, blockZ: bz, smem: smem, stream: s,
		attrs: uintptr(unsafe.Pointer(attr)), numAttrs: 1}
	r := d.ex.call(d.cuLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), uintptr(f), uintptr(params), 0)
	runtime.KeepAlive(attr) // referenced from cfg only as an integer
	if c := status(r); c != 0 {
		return d.err("cuLaunchKernelEx", c)
	}
	return nil
}

// clusterConfig is a launch of clusters of cz blocks along z (and, with
// pdl, programmatic stream serialization); attrs must outlive its use.
func clusterConfig(attrs *[2]launchAttr, gx, gy, gz, bx, by, bz, smem uint32, s Stream, cz uint32, pdl bool) *launchConfig {
	attrs[0] = launchAttr{id: launchAttrClusterDimension}
	binary.LittleEndian.PutUint32(attrs[0].val[0:], 1)
	binary.LittleEndian.PutUint32(attrs[0].val[4:], 1)
	binary.LittleEndian.PutUint32(attrs[0].val[8:], cz)
	n := uint32(1)
	if pdl {
		attrs[1] = launchAttr{id: launchAttrProgrammaticStreamSerialization}
		attrs[1].val[0] = 1
		n = 2
	}
	return &launchConfig{gridX: gx, gridY: gy, gridZ: gz, blockX: bx, blockY: by, blockZ: bz, smem: smem, stream: s,
		attrs: uintptr(unsafe.Pointer(&attrs[0])), numAttrs: n}
}

// LaunchCluster is Launch in thread-block clusters of cz blocks along the
// grid's z dimension (which cz divides), with programmatic dependent
// launch where pdl is set. Needs cuLaunchKernelEx and an sm_90 device;
// kernels that use other blocks' shared memory must be launched so.
func (d *Driver) LaunchCluster(f Function, gx, gy, gz, bx, by, bz, smem uint32, s Stream, params unsafe.Pointer, cz uint32, pdl bool) error {
	if d.cuLaunchKernelEx == 0 {
		return d.err("cuLaunchKernelEx", 500) // CUDA_ERROR_NOT_FOUND
	}
	var attrs [2]launchAttr
	cfg := clusterConfig(&attrs, gx, gy, gz, bx, by, bz, smem, s, cz, pdl)
	r := d.ex.call(d.cuLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), uintptr(f), uintptr(params), 0)
	runtime.KeepAlive(cfg)
	runtime.KeepAlive(&attrs)
	if c := status(r); c != 0 {
		return d.err("cuLaunchKernelEx", c)
	}
	return nil
}

// MaxActiveClusters is how many clusters of cz blocks (bx·by threads, smem
// bytes of dynamic shared memory each) of kernel f the device can hold at
// once (cuOccupancyMaxActiveClusters); 0 where it cannot say.
func (d *Driver) MaxActiveClusters(f Function, gx, gy, gz, bx, by, smem, cz uint32) (int, error) {
	if d.cuOccupancyMaxActiveClusters == 0 || d.cuLaunchKernelEx == 0 {
		return 0, nil
	}
	var attrs [2]launchAttr
	cfg := clusterConfig(&attrs, gx, gy, gz, bx, by, 1, smem, 0, cz, false)
	var n int32
	err := d.check("cuOccupancyMaxActiveClusters", d.cuOccupancyMaxActiveClusters, uintptr(unsafe.Pointer(&n)), uintptr(f),
		uintptr(unsafe.Pointer(cfg)))
	runtime.KeepAlive(&attrs)
	return int(n), err
}

// StreamCreate creates a stream (flags: StreamNonBlocking).
func (d *Driver) StreamCreate(flags int) (Stream, error) {
	var s Stream
	err := d.check("cuStreamCreate", d.cuStreamCreate, uintptr(unsafe.Pointer(&s)), uintptr(flags))
	return s, err
}

// StreamDestroy destroys a stream.
func (d *Driver) StreamDestroy(s Stream) error {
	return d.check("cuStreamDestroy", d.cuStreamDestroy, uintptr(s))
}

// StreamSynchronize waits for the stream's work; errors of earlier kernels
// (illegal addresses) surface here.
func (d *Driver) StreamSynchronize(s Stream) error {
	return d.check("cuStreamSynchronize", d.cuStreamSynchronize, uintptr(s))
}

// BeginCapture starts recording s's work into a graph (thread-local mode:
// other threads' CUDA calls are unaffected).
func (d *Driver) BeginCapture(s Stream) error {
	return d.check("cuStreamBeginCapture", d.cuStreamBeginCapture, uintptr(s), CaptureModeThreadLocal)
}

// EndCapture stops recording and returns the graph (0 if capture was invalidated).
func (d *Driver) EndCapture(s Stream) (Graph, error) {
	var g Graph
	err := d.check("cuStreamEndCapture", d.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	return g, err
}

// CaptureStatus reports whether s is capturing.
func (d *Driver) CaptureStatus(s Stream) (int, error) {
	var st int32
	err := d.check("cuStreamIsCapturing", d.cuStreamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&st)))
	return int(st), err
}

// GraphInstantiate makes an executable graph.
func (d *Driver) GraphInstantiate(g Graph) (GraphExec, error) {
	var e GraphExec
	err := d.check("cuGraphInstantiateWithFlags", d.cuGraphInstantiate, uintptr(unsafe.Pointer(&e)), uintptr(g), graphInstantiateFlagDefault)
	return e, err
}

// GraphLaunch enqueues an executable graph on s.
func (d *Driver) GraphLaunch(e GraphExec, s Stream) error {
	return d.check("cuGraphLaunch", d.cuGraphLaunch, uintptr(e), uintptr(s))
}

// ProfilerStart and ProfilerStop bound the region an external profiler
// (ncu --profile-from-start off) records; both are no-ops where libcuda
// lacks them.
func (d *Driver) ProfilerStart() error {
	if d.cuProfilerStart == 0 {
		return nil
	}
	return d.check("cuProfilerStart", d.cuProfilerStart)
}

// ProfilerStop ends the profiled region.
func (d *Driver) ProfilerStop() error {
	if d.cuProfilerStop == 0 {
		return nil
	}
	return d.check("cuProfilerStop", d.cuProfilerStop)
}

// GraphExecDestroy frees an executable graph.
func (d *Driver) GraphExecDestroy(e GraphExec) error {
	return d.check("cuGraphExecDestroy", d.cuGraphExecDestroy, uintptr(e))
}

// GraphDestroy frees a graph.
func (d *Driver) GraphDestroy(g Graph) error {
	return d.check("cuGraphDestroy", d.cuGraphDestroy, uintptr(g))
}

// EventCreate creates a timing event.
func (d *Driver) EventCreate() (Event, error) {
	var e Event
	err := d.check("cuEventCreate", d.cuEventCreate, uintptr(unsafe.Pointer(&e)), EventDefault)
	return e, err
}

// EventRecord records e on s.
func (d *Driver) EventRecord(e Event, s Stream) error {
	return d.check("cuEventRecord", d.cuEventRecord, uintptr(e), uintptr(s))
}

// EventSynchronize waits for e.
func (d *Driver) EventSynchronize(e Event) error {
	return d.check("cuEventSynchronize", d.cuEventSynchronize, uintptr(e))
}

// EventElapsed is the time between two recorded events in milliseconds.
func (d *Driver) EventElapsed(start, end Event) (float32, error) {
	var ms float32
	err := d.check("cuEventElapsedTime", d.cuEventElapsed, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end))
	return ms, err
}

// EventDestroy frees an event.
func (d *Driver) EventDestroy(e Event) error {
	return d.check("cuEventDestroy", d.cuEventDest, uintptr(e))
}
