package backend

// Checker is an optional capability of backends whose operators can fail at
// run time (a device: an out-of-memory, an illegal address): the operators
// have no error results, so such a backend records the first failure and
// skips later work, and Err returns that failure. A model's Forward should
// check it after ReadRows and return the error instead of the (invalid)
// logits:
//
//	if c, ok := be.(backend.Checker); ok {
//		if err := c.Err(); err != nil {
//			return err
//		}
//	}
type Checker interface {
	Err() error
}

// MemoryReporter is an optional capability of backends with their own
// memory (a GPU): free and total bytes of the device, and the bytes this
// backend has allocated, for `infernix plan` and load-time errors.
type MemoryReporter interface {
	Memory() (free, total, allocated uint64, err error)
}

// DeviceThreadRunner is an optional capability of backends whose device is
// owned by one OS thread (CUDA): RunOnDeviceThread runs f on that thread,
// so that a long-running device loop (the scheduler) calls the backend
// without a thread hand-over per call. Other goroutines' backend calls wait
// until f returns. The engine would start its scheduler loop as
//
//	if r, ok := be.(backend.DeviceThreadRunner); ok {
//		go r.RunOnDeviceThread(s.loop)
//	} else {
//		go s.loop()
//	}
type DeviceThreadRunner interface {
	RunOnDeviceThread(f func())
}

// BandwidthMeter is an optional capability of backends that can measure
// the memory bandwidth their decode is bound by (bytes read plus written per
// second by a large copy): the limit `infernix bench` reports decode speed
// against.
type BandwidthMeter interface {
	MeasureBandwidth() (bytesPerSecond float64, err error)
}
