//! The HDD model's float-to-integer rounding, written with the conversion's
//! truncation where libm's `round`, `trunc` and `floor` are calls (they run
//! several times per command, in the scheduler's loop).
//!
//! Decides nothing of the model: each must give exactly what the library
//! gives, bit for bit (`hdd::tests::rounding_helpers_match_the_library_bit_for_bit`),
//! or a simulated time moves.

use crate::device::Ns;

/// `x` ns rounded to a whole ns (half away from zero, as `f64::round`), 0
/// for a negative or NaN `x`. Written with the conversion's truncation: the
/// library's `round` is a call, and this runs several times per command.
#[inline]
pub(super) fn ns(x: f64) -> Ns {
    let x = x.max(0.0);
    let whole = x as Ns;
    // Exact: below 2^53 the whole part is a double and `x - whole` the
    // fraction without rounding; above, `x` is whole and the fraction 0.
    // Past `Ns::MAX` the conversion saturates, as `round() as Ns` does.
    whole.saturating_add(Ns::from(x - whole as f64 >= 0.5))
}

/// `x.fract()` by the conversion's truncation where `x` fits in an `i64`
/// (the library's `trunc` is a call, in the scheduler's loop); the same
/// value bit for bit.
#[inline]
pub(super) fn fract(x: f64) -> f64 {
    x - trunc(x)
}

/// `x.trunc()` bit for bit (a zero keeps the sign of `x`, as `trunc`'s does).
#[inline]
pub(super) fn trunc(x: f64) -> f64 {
    if x.abs() < 4_503_599_627_370_496.0 {
        // |x| < 2^52: the truncation is exact in an i64 and in a double.
        ((x as i64) as f64).copysign(x)
    } else {
        x.trunc()
    }
}

/// `x.floor()` bit for bit, by [`trunc`] where they agree (`x` not negative).
#[inline]
pub(super) fn floor(x: f64) -> f64 {
    if x >= 0.0 {
        trunc(x)
    } else {
        x.floor()
    }
}
