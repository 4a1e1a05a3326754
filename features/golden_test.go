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

// Golden values of generator splitmix64-sorf-v1 (structured orthogonal
// frequencies), recorded when it was written (TestStructuredGolden):
// block 5 of model seed 7 of a gaussian map (ℓ = 2) on 20 inputs in
// blocks of 8, and its features at x_i = (i mod 5) − 1.5.
var (
	goldenSORFSeed  uint64 = 0x649e25419b48ac05
	goldenSORFSigns        = []float64{1, -1, 1, 1, -1, 1, -1, -1}
	goldenSORFScale        = []float64{0.002223435538723729, 0.002237443707916882, 0.0021736063104816268, 0.0017814602391056087}
	goldenSORFPhi          = []float64{0.1934625852150696, -0.461055558606446, -0.29145046707548844, -0.4062716151067899, 0.10182235212903064, -0.48952242911526705, -0.49931745451144754, 0.026116654077588602}
)
