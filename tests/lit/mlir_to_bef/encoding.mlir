// RUN: od -t x1 %s.bef | FileCheck %s
// CHECK: 0000000 0b ef 00
