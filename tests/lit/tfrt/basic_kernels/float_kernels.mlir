// RUN: bef_executor %s.bef 2>&1 | FileCheck %s --dump-input=fail

// Reconstruction of TFRT's mlir_tests/basic_kernels/float_kernels.mlir:
// f32/f64 arithmetic rounded at the kernel's precision, prints with %f, casts.

// CHECK-LABEL: --- Running 'basic_f32'
func.func @basic_f32() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %zero = tfrt.constant.f32 0.0
  %one = tfrt.constant.f32 1.0
  %x = tfrt.constant.f32 312.27137
  // CHECK-NEXT: f32 = 312.271362
  %ch1 = tfrt.print.f32 %x, %ch0

  %two = tfrt.add.f32 %one, %one
  // CHECK-NEXT: f32 = 2.000000
  %ch2 = tfrt.print.f32 %two, %ch1

  %min = "tfrt.minimum.f32"(%one, %two) : (f32, f32) -> f32
  // CHECK-NEXT: f32 = 1.000000
  %ch3 = tfrt.print.f32 %min, %ch2

  %half = "tfrt.div.f32"(%one, %two) : (f32, f32) -> f32
  // CHECK-NEXT: f32 = 0.500000
  %ch4 = tfrt.print.f32 %half, %ch3

  %prod = "tfrt.multiply.f32"(%x, %two) : (f32, f32) -> f32
  // CHECK-NEXT: f32 = 624.542725
  %ch5 = tfrt.print.f32 %prod, %ch4

  %third = tfrt.constant.f32 0.333333343
  %s = tfrt.add.f32 %third, %third
  // CHECK-NEXT: f32 = 0.666667
  %ch6 = tfrt.print.f32 %s, %ch5

  // CHECK-NEXT: 'basic_f32' returned !tfrt.chain value
  tfrt.return %ch6 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'basic_f64'
func.func @basic_f64() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %one = tfrt.constant.f64 1.0
  %x = tfrt.constant.f64 312.27137
  // CHECK-NEXT: f64 = 312.271370
  %ch1 = tfrt.print.f64 %x, %ch0

  %two = tfrt.add.f64 %one, %one
  // CHECK-NEXT: f64 = 2.000000
  %ch2 = tfrt.print.f64 %two, %ch1

  %half = "tfrt.div.f64"(%one, %two) : (f64, f64) -> f64
  // CHECK-NEXT: f64 = 0.500000
  %ch3 = tfrt.print.f64 %half, %ch2

  %prod = "tfrt.multiply.f64"(%x, %two) : (f64, f64) -> f64
  // CHECK-NEXT: f64 = 624.542740
  %ch4 = tfrt.print.f64 %prod, %ch3

  %y = tfrt.constant.f64 0.347354
  // CHECK-NEXT: f64 = 0.347354
  %ch5 = tfrt.print.f64 %y, %ch4

  // CHECK-NEXT: 'basic_f64' returned !tfrt.chain value
  tfrt.return %ch5 : !tfrt.chain
}

// CHECK-LABEL: --- Running 'divide_by_zero'
func.func @divide_by_zero() -> (f32, f64) {
  %one = tfrt.constant.f32 1.0
  %zero = tfrt.constant.f32 0.0
  %one64 = tfrt.constant.f64 1.0
  %zero64 = tfrt.constant.f64 0.0
  // expected-error @+1 {{runtime error: Divide by zero}}
  %x = "tfrt.div.f32"(%one, %zero) : (f32, f32) -> f32
  // expected-error @+1 {{runtime error: Divide by zero}}
  %y = "tfrt.div.f64"(%one64, %zero64) : (f64, f64) -> f64
  // CHECK-NEXT: 'divide_by_zero' returned <<error: Divide by zero>>,<<error: Divide by zero>>
  tfrt.return %x, %y : f32, f64
}

// CHECK-LABEL: --- Running 'casts'
func.func @casts() -> !tfrt.chain {
  %ch0 = tfrt.new.chain
  %i = tfrt.constant.i64 123456789
  %f = "tfrt.cast.i64_to_f32"(%i) : (i64) -> f32
  // CHECK-NEXT: f32 = 123456792.000000
  %ch1 = tfrt.print.f32 %f, %ch0
  %d = "tfrt.cast.i64_to_f64"(%i) : (i64) -> f64
  // CHECK-NEXT: f64 = 123456789.000000
  %ch2 = tfrt.print.f64 %d, %ch1

  %neg = tfrt.constant.f32 -2.75
  %j = "tfrt.cast.f32_to_i64"(%neg) : (f32) -> i64
  // CHECK-NEXT: int64 = -2
  %ch3 = tfrt.print.i64 %j, %ch2
  %pos = tfrt.constant.f64 2.75
  %k = "tfrt.cast.f64_to_i64"(%pos) : (f64) -> i64
  // CHECK-NEXT: int64 = 2
  %ch4 = tfrt.print.i64 %k, %ch3

  // CHECK-NEXT: 'casts' returned !tfrt.chain value
  tfrt.return %ch4 : !tfrt.chain
}
