// Float, complex and cast kernels of the tfrt dialect: f32 rounds to float32 at every step.
// RUN: bef_executor %s.bef 2>&1 | FileCheck %s

// CHECK-LABEL: --- Running 'arith_f64'
func.func @arith_f64() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.f64 10.0
  %b = tfrt.constant.f64 4.0
  %add = tfrt.add.f64 %a, %b
  %div = "tfrt.div.f64"(%a, %b) : (f64, f64) -> f64
  %min = "tfrt.minimum.f64"(%a, %b) : (f64, f64) -> f64
  %mul = "tfrt.multiply.f64"(%a, %b) : (f64, f64) -> f64
  // CHECK-NEXT: f64 = 14.000000
  %ch1 = tfrt.print.f64 %add, %ch0
  // CHECK-NEXT: f64 = 2.500000
  %ch2 = tfrt.print.f64 %div, %ch1
  // CHECK-NEXT: f64 = 4.000000
  %ch3 = tfrt.print.f64 %min, %ch2
  // CHECK-NEXT: f64 = 40.000000
  %ch4 = tfrt.print.f64 %mul, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'arith_f32'
func.func @arith_f32() {
  %ch0 = tfrt.new.chain
  %a = tfrt.constant.f32 0.1
  %b = tfrt.constant.f32 0.2
  %add = tfrt.add.f32 %a, %b
  %three = tfrt.constant.f32 3.0
  %div = "tfrt.div.f32"(%add, %three) : (f32, f32) -> f32
  %min = "tfrt.minimum.f32"(%a, %b) : (f32, f32) -> f32
  %mul = "tfrt.multiply.f32"(%div, %three) : (f32, f32) -> f32
  // float32(0.1) + float32(0.2) = 0.3000000119..., printed with %f
  // CHECK-NEXT: f32 = 0.300000
  %ch1 = tfrt.print.f32 %add, %ch0
  // CHECK-NEXT: f32 = 0.100000
  %ch2 = tfrt.print.f32 %div, %ch1
  // CHECK-NEXT: f32 = 0.100000
  %ch3 = tfrt.print.f32 %min, %ch2
  // CHECK-NEXT: f32 = 0.300000
  %ch4 = tfrt.print.f32 %mul, %ch3
  tfrt.return
}

// CHECK-LABEL: --- Running 'resize_f32'
func.func @resize_f32() {
  %ch0 = tfrt.new.chain
  %target = tfrt.constant.f32 256.0
  %h = tfrt.constant.i64 737
  %w = tfrt.constant.i64 899
  %hf = "tfrt.cast.i64_to_f32"(%h) : (i64) -> f32
  %wf = "tfrt.cast.i64_to_f32"(%w) : (i64) -> f32
  %small = "tfrt.minimum.f32"(%hf, %wf) : (f32, f32) -> f32
  %ratio = "tfrt.div.f32"(%target, %small) : (f32, f32) -> f32
  %nh = "tfrt.multiply.f32"(%hf, %ratio) : (f32, f32) -> f32
  %nw = "tfrt.multiply.f32"(%wf, %ratio) : (f32, f32) -> f32
  %ih = "tfrt.cast.f32_to_i64"(%nh) : (f32) -> i64
  %iw = "tfrt.cast.f32_to_i64"(%nw) : (f32) -> i64
  // CHECK-NEXT: f32 = 0.347354
  %ch1 = tfrt.print.f32 %ratio, %ch0
  // CHECK-NEXT: f32 = 256.000000
  %ch2 = tfrt.print.f32 %nh, %ch1
  // CHECK-NEXT: f32 = 312.271362
  %ch3 = tfrt.print.f32 %nw, %ch2
  // CHECK-NEXT: int64 = 256
  %ch4 = tfrt.print.i64 %ih, %ch3
  // CHECK-NEXT: int64 = 312
  %ch5 = tfrt.print.i64 %iw, %ch4
  tfrt.return
}

// CHECK-LABEL: --- Running 'resize_f64'
func.func @resize_f64() {
  %ch0 = tfrt.new.chain
  %target = tfrt.constant.f64 256.0
  %h = tfrt.constant.i64 737
  %w = tfrt.constant.i64 899
  %hf = "tfrt.cast.i64_to_f64"(%h) : (i64) -> f64
  %wf = "tfrt.cast.i64_to_f64"(%w) : (i64) -> f64
  %small = "tfrt.minimum.f64"(%hf, %wf) : (f64, f64) -> f64
  %ratio = "tfrt.div.f64"(%target, %small) : (f64, f64) -> f64
  %nh = "tfrt.multiply.f64"(%hf, %ratio) : (f64, f64) -> f64
  %nw = "tfrt.multiply.f64"(%wf, %ratio) : (f64, f64) -> f64
  %ih = "tfrt.cast.f64_to_i64"(%nh) : (f64) -> i64
  %iw = "tfrt.cast.f64_to_i64"(%nw) : (f64) -> i64
  // CHECK-NEXT: f64 = 312.271370
  %ch1 = tfrt.print.f64 %nw, %ch0
  // 737 * (256 / 737) is 255.99999999999997 in double: truncation gives 255
  // CHECK-NEXT: int64 = 255
  %ch2 = tfrt.print.i64 %ih, %ch1
  // CHECK-NEXT: int64 = 312
  %ch3 = tfrt.print.i64 %iw, %ch2
  tfrt.return
}

// CHECK-LABEL: --- Running 'float_div_by_zero'
func.func @float_div_by_zero() -> f32 {
  %a = tfrt.constant.f32 1.0
  %z = tfrt.constant.f32 0.0
  // expected-error @+1 {{runtime error: Divide by zero}}
  %d = "tfrt.div.f32"(%a, %z) : (f32, f32) -> f32
  // CHECK-NEXT: 'float_div_by_zero' returned <<error: Divide by zero>>
  tfrt.return %d : f32
}

// CHECK-LABEL: --- Running 'f16_and_complex'
func.func @f16_and_complex() {
  %ch0 = tfrt.new.chain
  %h = tfrt.constant.f16 1.0
  // The raw float16 bit pattern of 1.0 is 0x3C00.
  // CHECK-NEXT: f16 = 15360
  %ch1 = "tfrt.print.f16"(%h, %ch0) : (f16, !tfrt.chain) -> !tfrt.chain
  %c = "tfrt.constant.complex64"() {real = 1.5 : f32, imaginary = -2.0 : f32} : () -> complex<f32>
  // CHECK-NEXT: complex64 = 1.500000+-2.000000i
  %ch2 = "tfrt.print.complex64"(%c, %ch1) : (complex<f32>, !tfrt.chain) -> !tfrt.chain
  %d = "tfrt.constant.complex128"() {real = 0.25 : f64, imaginary = 4.0 : f64} : () -> complex<f64>
  // CHECK-NEXT: complex128 = 0.250000+4.000000i
  %ch3 = "tfrt.print.complex128"(%d, %ch2) : (complex<f64>, !tfrt.chain) -> !tfrt.chain
  tfrt.return
}

// CHECK-LABEL: --- Running 'float_results'
func.func @float_results() -> (f32, f64) {
  %a = tfrt.constant.f32 0.5
  %b = tfrt.constant.f64 -2.0
  // CHECK-NEXT: 'float_results' returned 5.000000e-01,-2.000000e+00
  tfrt.return %a, %b : f32, f64
}
