// FizzBuzz counting with TFRT's control flow: for i = 1..n, count the numbers divisible by 15
// ("fizzbuzz"), by 3 only ("fizz") and by 5 only ("buzz").  The loop is a tfrt.repeat.i32 whose
// body carries the counters; the classification is a chain of nested tfrt.if regions.
//
// TFRT's region ops are isolated from above: a region body is a new name scope.  Its entry
// arguments take the names of the operands passed in (so the body below sees %i, %fb, ... as
// the loop-carried values), and it may define names the enclosing function already uses:
// %q and %r are defined in the function body and again in every nested region.
//
// Run: bef_executor examples/fizzbuzz/fizzbuzz.mlir

func.func @count(%n: i32) -> (i32, i32, i32) {
  %one = tfrt.constant.i32 1
  %three = tfrt.constant.i32 3
  %five = tfrt.constant.i32 5
  %fifteen = tfrt.constant.i32 15
  // The loop-carried values, named as the loop body sees them.
  %i = tfrt.constant.i32 0
  %fb = tfrt.constant.i32 0
  %f = tfrt.constant.i32 0
  %b = tfrt.constant.i32 0
  // %q and %r are defined again inside the loop body.
  %q, %r = tfrt.div.i32 %n, %one

  %i_end, %fb_end, %f_end, %b_end, %o1, %t1, %v1, %x1 = tfrt.repeat.i32 %n,
      %i, %fb, %f, %b, %one, %three, %five, %fifteen
      : i32, i32, i32, i32, i32, i32, i32, i32 {
    %next = tfrt.add.i32 %i, %one
    %q, %r = tfrt.div.i32 %next, %fifteen
    %zero = tfrt.constant.i32 0
    %by15 = tfrt.equal.i32 %r, %zero
    %fb2, %f2, %b2 = tfrt.if %by15, %next, %fb, %f, %b, %one, %three, %five
        : (i32, i32, i32, i32, i32, i32, i32) -> (i32, i32, i32) {
      %fb2 = tfrt.add.i32 %fb, %one
      tfrt.return %fb2, %f, %b : i32, i32, i32
    } else {
      %q, %r = tfrt.div.i32 %next, %three
      %zero = tfrt.constant.i32 0
      %by3 = tfrt.equal.i32 %r, %zero
      %f2, %b2 = tfrt.if %by3, %next, %f, %b, %one, %five
          : (i32, i32, i32, i32, i32) -> (i32, i32) {
        %f2 = tfrt.add.i32 %f, %one
        tfrt.return %f2, %b : i32, i32
      } else {
        %q, %r = tfrt.div.i32 %next, %five
        %zero = tfrt.constant.i32 0
        %by5 = tfrt.equal.i32 %r, %zero
        %b2 = tfrt.if %by5, %b, %one : (i32, i32) -> (i32) {
          %b2 = tfrt.add.i32 %b, %one
          tfrt.return %b2 : i32
        } else {
          tfrt.return %b : i32
        }
        tfrt.return %f, %b2 : i32, i32
      }
      tfrt.return %fb, %f2, %b2 : i32, i32, i32
    }
    tfrt.return %next, %fb2, %f2, %b2, %one, %three, %five, %fifteen
        : i32, i32, i32, i32, i32, i32, i32, i32
  }
  tfrt.return %fb_end, %f_end, %b_end : i32, i32, i32
}

// Counts for 1..100: 6 multiples of 15, 27 other multiples of 3, 14 other multiples of 5.
func.func @fizzbuzz() -> (i32, i32, i32) {
  %n = tfrt.constant.i32 100
  %fizzbuzz, %fizz, %buzz = tfrt.call @count(%n) : (i32) -> (i32, i32, i32)
  tfrt.return %fizzbuzz, %fizz, %buzz : i32, i32, i32
}
