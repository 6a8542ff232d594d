// no_bef_translation
// RUN: tfrt_opt -tg-dnnl-blocked %s | FileCheck %s

// A bottleneck block on a 10x10 image of 256 channels, then the global pool: one reorder into
// the blocked layout at the input, every conv blocked (the 3x3 window too: its output has 100
// pixels), the pool reads the blocked result and a reshape gives the NHWC [N, 1, 1, C] back
// (the same bytes).  (720k multiply-adds per pixel for the 256 elements reordered.)
// CHECK-LABEL: func.func @block
func.func @block(%x: tensor<?x10x10x256xf32>) -> tensor<?x1x1x256xf32> {
  %w1 = "tg.constant"() {value = dense<0.5> : tensor<1x1x256x256xf32>} : () -> tensor<1x1x256x256xf32>
  %w2 = "tg.constant"() {value = dense<0.5> : tensor<3x3x256x256xf32>} : () -> tensor<3x3x256x256xf32>
  %b = "tg.constant"() {value = dense<0.1> : tensor<256xf32>} : () -> tensor<256xf32>
  // CHECK: %[[R:.*]] = "tg.reorder_layout"(%arg0) {dst_layout = "NCHW16c", src_layout = "NHWC"} : (tensor<?x10x10x256xf32>) -> tensor<?x16x10x10x16xf32>
  // CHECK: %[[A:.*]] = "tg.conv2d"(%[[R]], %{{.*}}, %{{.*}}) {activation = "relu", {{.*}}layout = "NCHW16c"{{.*}} : (tensor<?x16x10x10x16xf32>, tensor<1x1x256x256xf32>, tensor<256xf32>) -> tensor<?x16x10x10x16xf32>
  // CHECK: %[[B:.*]] = "tg.conv2d"(%[[A]], %{{.*}}) {{{.*}}layout = "NCHW16c", pads = [1{{.*}} : (tensor<?x16x10x10x16xf32>, tensor<3x3x256x256xf32>) -> tensor<?x16x10x10x16xf32>
  // CHECK: %[[C:.*]] = "tg.conv2d"(%[[B]], %{{.*}}, %[[R]]) {activation = "relu", {{.*}}layout = "NCHW16c"{{.*}} -> tensor<?x16x10x10x16xf32>
  // CHECK: %[[P:.*]] = "tg.global_avg_pool"(%[[C]]) {layout = "NCHW16c"} : (tensor<?x16x10x10x16xf32>) -> tensor<?x16x1x1x16xf32>
  // CHECK: %[[S:.*]] = "tg.reshape"(%[[P]]) {shape = [-1{{( : i64)?}}, 1{{( : i64)?}}, 1{{( : i64)?}}, 256{{( : i64)?}}]} : (tensor<?x16x1x1x16xf32>) -> tensor<?x1x1x256xf32>
  // CHECK-NOT: "tg.reorder_layout"
  // CHECK: func.return %[[S]]
  %a = "tg.conv2d"(%x, %w1, %b) {layout = "NHWC", activation = "relu", epilogue_operands = [1, 0]} : (tensor<?x10x10x256xf32>, tensor<1x1x256x256xf32>, tensor<256xf32>) -> tensor<?x10x10x256xf32>
  %c = "tg.conv2d"(%a, %w2) {layout = "NHWC", pads = [1, 1, 1, 1]} : (tensor<?x10x10x256xf32>, tensor<3x3x256x256xf32>) -> tensor<?x10x10x256xf32>
  %d = "tg.conv2d"(%c, %w1, %x) {layout = "NHWC", activation = "relu", epilogue_operands = [0, 1]} : (tensor<?x10x10x256xf32>, tensor<1x1x256x256xf32>, tensor<?x10x10x256xf32>) -> tensor<?x10x10x256xf32>
  %p = "tg.global_avg_pool"(%d) {layout = "NHWC"} : (tensor<?x10x10x256xf32>) -> tensor<?x1x1x256xf32>
  func.return %p : tensor<?x1x1x256xf32>
}

// On a 4x4 image the 3x3 window (16 output pixels, fewer than BLOCKED_WINDOW_MIN_PIXELS) stays
// NHWC between a reorder out of the run and one back into it; the 1x1 convolutions around it
// (four: a run long enough, 1,400 multiply-adds per element reordered) are blocked.
// CHECK-LABEL: func.func @bridge
func.func @bridge(%x: tensor<1x4x4x64xf32>) -> tensor<1x1x1x64xf32> {
  %w1 = "tg.constant"() {value = dense<0.5> : tensor<1x1x64x64xf32>} : () -> tensor<1x1x64x64xf32>
  %w2 = "tg.constant"() {value = dense<0.5> : tensor<3x3x64x64xf32>} : () -> tensor<3x3x64x64xf32>
  %w3 = "tg.constant"() {value = dense<0.5> : tensor<1x1x64x2048xf32>} : () -> tensor<1x1x64x2048xf32>
  %w4 = "tg.constant"() {value = dense<0.5> : tensor<1x1x2048x64xf32>} : () -> tensor<1x1x2048x64xf32>
  // CHECK: %[[R:.*]] = "tg.reorder_layout"(%arg0) {dst_layout = "NCHW16c", src_layout = "NHWC"}
  // CHECK: %[[A:.*]] = "tg.conv2d"(%[[R]], {{.*}}layout = "NCHW16c"
  // CHECK-NEXT: %[[AN:.*]] = "tg.reorder_layout"(%[[A]]) {dst_layout = "NHWC", src_layout = "NCHW16c"} : (tensor<1x4x4x4x16xf32>) -> tensor<1x4x4x64xf32>
  // CHECK: %[[W:.*]] = "tg.conv2d"(%[[AN]], %{{.*}}) {layout = "NHWC", pads = [1, 1, 1, 1]}
  // CHECK-NEXT: %[[WB:.*]] = "tg.reorder_layout"(%[[W]]) {dst_layout = "NCHW16c", src_layout = "NHWC"}
  // CHECK: %[[C:.*]] = "tg.conv2d"(%[[WB]], %{{.*}}, %[[R]]) {{{.*}}layout = "NCHW16c"
  // CHECK: %[[E:.*]] = "tg.conv2d"(%[[C]], {{.*}}layout = "NCHW16c"
  // CHECK: "tg.conv2d"(%[[E]], {{.*}}layout = "NCHW16c"
  %a = "tg.conv2d"(%x, %w1) {layout = "NHWC"} : (tensor<1x4x4x64xf32>, tensor<1x1x64x64xf32>) -> tensor<1x4x4x64xf32>
  %c = "tg.conv2d"(%a, %w2) {layout = "NHWC", pads = [1, 1, 1, 1]} : (tensor<1x4x4x64xf32>, tensor<3x3x64x64xf32>) -> tensor<1x4x4x64xf32>
  %d = "tg.conv2d"(%c, %w1, %x) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x4x4x64xf32>, tensor<1x1x64x64xf32>, tensor<1x4x4x64xf32>) -> tensor<1x4x4x64xf32>
  %e = "tg.conv2d"(%d, %w3) {layout = "NHWC"} : (tensor<1x4x4x64xf32>, tensor<1x1x64x2048xf32>) -> tensor<1x4x4x2048xf32>
  %f = "tg.conv2d"(%e, %w4) {layout = "NHWC"} : (tensor<1x4x4x2048xf32>, tensor<1x1x2048x64xf32>) -> tensor<1x4x4x64xf32>
  %p = "tg.global_avg_pool"(%f) {layout = "NHWC"} : (tensor<1x4x4x64xf32>) -> tensor<1x1x1x64xf32>
  func.return %p : tensor<1x1x1x64xf32>
}

// A blocked result that something else reads too (here: the function's result) is reordered
// back to NHWC once, after its convolution; a last convolution whose result only leaves the
// run stays NHWC (the reorder moves before it).
// CHECK-LABEL: func.func @leaves
func.func @leaves(%x: tensor<1x2x2x16xf32>) -> (tensor<1x2x2x1024xf32>, tensor<1x1x1x16xf32>, tensor<1x2x2x16xf32>) {
  %wa = "tg.constant"() {value = dense<0.5> : tensor<1x1x16x1024xf32>} : () -> tensor<1x1x16x1024xf32>
  %wb = "tg.constant"() {value = dense<0.5> : tensor<1x1x1024x2048xf32>} : () -> tensor<1x1x1024x2048xf32>
  %wc = "tg.constant"() {value = dense<0.5> : tensor<1x1x2048x16xf32>} : () -> tensor<1x1x2048x16xf32>
  %w = "tg.constant"() {value = dense<0.5> : tensor<1x1x16x16xf32>} : () -> tensor<1x1x16x16xf32>
  // CHECK: "tg.reorder_layout"(%arg0) {dst_layout = "NCHW16c", src_layout = "NHWC"}
  // CHECK: %[[A:.*]] = "tg.conv2d"({{.*}}layout = "NCHW16c"
  // CHECK-NEXT: %[[AN:.*]] = "tg.reorder_layout"(%[[A]]) {dst_layout = "NHWC", src_layout = "NCHW16c"} : (tensor<1x64x2x2x16xf32>) -> tensor<1x2x2x1024xf32>
  // CHECK: "tg.conv2d"({{.*}}layout = "NCHW16c"
  // CHECK: %[[C:.*]] = "tg.conv2d"({{.*}}layout = "NCHW16c"
  // CHECK-NEXT: %[[CN:.*]] = "tg.reorder_layout"(%[[C]]) {dst_layout = "NHWC", src_layout = "NCHW16c"}
  // CHECK: "tg.global_avg_pool"(%[[C]]) {layout = "NCHW16c"}
  // CHECK: %[[D:.*]] = "tg.conv2d"(%[[CN]], %{{.*}}) {layout = "NHWC"}
  // CHECK: func.return %[[AN]], %{{.*}}, %[[D]]
  %a = "tg.conv2d"(%x, %wa) {layout = "NHWC"} : (tensor<1x2x2x16xf32>, tensor<1x1x16x1024xf32>) -> tensor<1x2x2x1024xf32>
  %b = "tg.conv2d"(%a, %wb) {layout = "NHWC"} : (tensor<1x2x2x1024xf32>, tensor<1x1x1024x2048xf32>) -> tensor<1x2x2x2048xf32>
  %c = "tg.conv2d"(%b, %wc) {layout = "NHWC"} : (tensor<1x2x2x2048xf32>, tensor<1x1x2048x16xf32>) -> tensor<1x2x2x16xf32>
  %p = "tg.global_avg_pool"(%c) {layout = "NHWC"} : (tensor<1x2x2x16xf32>) -> tensor<1x1x1x16xf32>
  %d = "tg.conv2d"(%c, %w) {layout = "NHWC"} : (tensor<1x2x2x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x2x2x16xf32>
  func.return %a, %p, %d : tensor<1x2x2x1024xf32>, tensor<1x1x1x16xf32>, tensor<1x2x2x16xf32>
}

// What stays NHWC: channels not a multiple of 16 (24 in the middle: the run breaks into pieces
// shorter than three convolutions), images of more than 196 pixels (15x15), runs of two, and
// runs whose multiply-adds are few for what their reorders copy (@cheap).
// CHECK-LABEL: func.func @stays
// CHECK-NOT: NCHW16c
// CHECK: func.return
func.func @stays(%x: tensor<1x4x4x16xf32>, %y: tensor<1x15x15x16xf32>) -> (tensor<1x4x4x16xf32>, tensor<1x15x15x16xf32>) {
  %w = "tg.constant"() {value = dense<0.5> : tensor<1x1x16x16xf32>} : () -> tensor<1x1x16x16xf32>
  %wa = "tg.constant"() {value = dense<0.5> : tensor<1x1x16x24xf32>} : () -> tensor<1x1x16x24xf32>
  %wb = "tg.constant"() {value = dense<0.5> : tensor<1x1x24x16xf32>} : () -> tensor<1x1x24x16xf32>
  %a = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %b = "tg.conv2d"(%a, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %c = "tg.conv2d"(%b, %wa) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x24xf32>) -> tensor<1x4x4x24xf32>
  %d = "tg.conv2d"(%c, %wb) {layout = "NHWC"} : (tensor<1x4x4x24xf32>, tensor<1x1x24x16xf32>) -> tensor<1x4x4x16xf32>
  %e = "tg.conv2d"(%d, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %f = "tg.conv2d"(%y, %w) {layout = "NHWC"} : (tensor<1x15x15x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x15x15x16xf32>
  %g = "tg.conv2d"(%f, %w) {layout = "NHWC"} : (tensor<1x15x15x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x15x15x16xf32>
  %h = "tg.conv2d"(%g, %w) {layout = "NHWC"} : (tensor<1x15x15x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x15x15x16xf32>
  func.return %e, %h : tensor<1x4x4x16xf32>, tensor<1x15x15x16xf32>
}

// CHECK-LABEL: func.func @cheap
// CHECK-NOT: NCHW16c
// CHECK: func.return
func.func @cheap(%x: tensor<1x4x4x16xf32>) -> tensor<1x1x1x16xf32> {
  %w = "tg.constant"() {value = dense<0.5> : tensor<1x1x16x16xf32>} : () -> tensor<1x1x16x16xf32>
  %a = "tg.conv2d"(%x, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %b = "tg.conv2d"(%a, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %c = "tg.conv2d"(%b, %w) {layout = "NHWC"} : (tensor<1x4x4x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x4x4x16xf32>
  %p = "tg.global_avg_pool"(%c) {layout = "NHWC"} : (tensor<1x4x4x16xf32>) -> tensor<1x1x1x16xf32>
  func.return %p : tensor<1x1x1x16xf32>
}

// A strided entry: a 1x1 stride-2 projection without padding from a 16x16 image (256 pixels,
// more than the blocked layout's 196) into an 8x8 run reads a subsampling reorder of only the
// pixels it uses and runs blocked at stride 1; the 3x3 stride-2 layer beside it (not 1x1)
// stays NHWC, its result reordered into the run.
// CHECK-LABEL: func.func @strided_entry
func.func @strided_entry(%x: tensor<1x16x16x256xf32>) -> tensor<1x1x1x1024xf32> {
  %wp = "tg.constant"() {value = dense<0.5> : tensor<1x1x256x1024xf32>} : () -> tensor<1x1x256x1024xf32>
  %w3 = "tg.constant"() {value = dense<0.5> : tensor<3x3x256x256xf32>} : () -> tensor<3x3x256x256xf32>
  %wu = "tg.constant"() {value = dense<0.5> : tensor<1x1x256x1024xf32>} : () -> tensor<1x1x256x1024xf32>
  %wd = "tg.constant"() {value = dense<0.5> : tensor<1x1x1024x256xf32>} : () -> tensor<1x1x1024x256xf32>
  // CHECK: %[[S:.*]] = "tg.reorder_layout"(%arg0) {dst_layout = "NCHW16c", src_layout = "NHWC", strides = [2{{( : i64)?}}, 2{{( : i64)?}}]} : (tensor<1x16x16x256xf32>) -> tensor<1x16x8x8x16xf32>
  // CHECK: %[[P:.*]] = "tg.conv2d"(%[[S]], %{{.*}}) {{{.*}}layout = "NCHW16c"{{.*}}strides = [1{{( : i64)?}}, 1{{( : i64)?}}]{{.*}} : (tensor<1x16x8x8x16xf32>, tensor<1x1x256x1024xf32>) -> tensor<1x64x8x8x16xf32>
  // CHECK: %[[W:.*]] = "tg.conv2d"(%arg0, %{{.*}}) {layout = "NHWC", pads = [1{{.*}}strides = [2
  // CHECK-NEXT: %[[WB:.*]] = "tg.reorder_layout"(%[[W]]) {dst_layout = "NCHW16c", src_layout = "NHWC"} : (tensor<1x8x8x256xf32>)
  // CHECK: %[[U:.*]] = "tg.conv2d"(%[[WB]], %{{.*}}, %[[P]]) {{{.*}}layout = "NCHW16c"
  // CHECK: %[[D:.*]] = "tg.conv2d"(%[[U]], {{.*}}layout = "NCHW16c"
  // CHECK: "tg.conv2d"(%[[D]], %{{.*}}, %[[U]]) {{{.*}}layout = "NCHW16c"
  // CHECK-NOT: "tg.reorder_layout"
  // CHECK: func.return
  %p = "tg.conv2d"(%x, %wp) {layout = "NHWC", strides = [2, 2]} : (tensor<1x16x16x256xf32>, tensor<1x1x256x1024xf32>) -> tensor<1x8x8x1024xf32>
  %w = "tg.conv2d"(%x, %w3) {layout = "NHWC", pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x16x16x256xf32>, tensor<3x3x256x256xf32>) -> tensor<1x8x8x256xf32>
  %u = "tg.conv2d"(%w, %wu, %p) {layout = "NHWC", activation = "relu", epilogue_operands = [0, 1]} : (tensor<1x8x8x256xf32>, tensor<1x1x256x1024xf32>, tensor<1x8x8x1024xf32>) -> tensor<1x8x8x1024xf32>
  %d = "tg.conv2d"(%u, %wd) {layout = "NHWC", activation = "relu"} : (tensor<1x8x8x1024xf32>, tensor<1x1x1024x256xf32>) -> tensor<1x8x8x256xf32>
  %e = "tg.conv2d"(%d, %wu, %u) {layout = "NHWC", activation = "relu", epilogue_operands = [0, 1]} : (tensor<1x8x8x256xf32>, tensor<1x1x256x1024xf32>, tensor<1x8x8x1024xf32>) -> tensor<1x8x8x1024xf32>
  %g = "tg.global_avg_pool"(%e) {layout = "NHWC"} : (tensor<1x8x8x1024xf32>) -> tensor<1x1x1x1024xf32>
  %r = "tg.reshape"(%g) {shape = [1, 1, 1, 1024]} : (tensor<1x1x1x1024xf32>) -> tensor<1x1x1x1024xf32>
  func.return %r : tensor<1x1x1x1024xf32>
}

// A strided 1x1 layer with padding, or a strided one from an image already small enough
// (8x8: an ordinary candidate, oneDNN's kernel strides itself), reads no subsampling reorder.
// CHECK-LABEL: func.func @no_entry
// CHECK-NOT: "tg.reorder_layout"{{.*}}strides
// CHECK: func.return
func.func @no_entry(%x: tensor<1x16x16x256xf32>, %y: tensor<1x8x8x256xf32>) -> (tensor<1x9x9x1024xf32>, tensor<1x4x4x1024xf32>) {
  %wp = "tg.constant"() {value = dense<0.5> : tensor<1x1x256x1024xf32>} : () -> tensor<1x1x256x1024xf32>
  %wd = "tg.constant"() {value = dense<0.5> : tensor<1x1x1024x256xf32>} : () -> tensor<1x1x1024x256xf32>
  %p = "tg.conv2d"(%x, %wp) {layout = "NHWC", pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<1x16x16x256xf32>, tensor<1x1x256x1024xf32>) -> tensor<1x9x9x1024xf32>
  %a = "tg.conv2d"(%p, %wd) {layout = "NHWC"} : (tensor<1x9x9x1024xf32>, tensor<1x1x1024x256xf32>) -> tensor<1x9x9x256xf32>
  %b = "tg.conv2d"(%a, %wp, %p) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x9x9x256xf32>, tensor<1x1x256x1024xf32>, tensor<1x9x9x1024xf32>) -> tensor<1x9x9x1024xf32>
  %q = "tg.conv2d"(%y, %wp) {layout = "NHWC", strides = [2, 2]} : (tensor<1x8x8x256xf32>, tensor<1x1x256x1024xf32>) -> tensor<1x4x4x1024xf32>
  %c = "tg.conv2d"(%q, %wd) {layout = "NHWC"} : (tensor<1x4x4x1024xf32>, tensor<1x1x1024x256xf32>) -> tensor<1x4x4x256xf32>
  %e = "tg.conv2d"(%c, %wp, %q) {layout = "NHWC", epilogue_operands = [0, 1]} : (tensor<1x4x4x256xf32>, tensor<1x1x256x1024xf32>, tensor<1x4x4x1024xf32>) -> tensor<1x4x4x1024xf32>
  func.return %b, %e : tensor<1x9x9x1024xf32>, tensor<1x4x4x1024xf32>
}
