package features

// Golden values of generator splitmix64-bm-v1, recorded when it was
// written (see TestGeneratorGolden). Never edit them to make a test pass.
var (
	goldenWords          = []uint64{0x33aa906d7b87bf0e, 0xdf307a5b580bbdc1, 0x901a197afcaae09b}
	goldenNormals        = []float64{1.2396400231236315, -1.289975714495629, 0.9330112434193633, 0.5197700185467364, 0.793284342928164}
	goldenSeed    uint64 = 0x8b6c9198506b188
	goldenOmega          = []float64{0.05754118497712302, -0.013816809397280957, -0.04836925013041218}
	goldenPhase3         = 0.4500370364608974
	goldenPhi            = []float64{-0.14103893827846767, 0.030258033010332315, -0.12252415962399134, -0.48146614319402614}
)
