//! The `raidlab` command: parses arguments, wires volumes together, prints.
//! It holds no storage logic of its own.

fn main() {
    println!("raidlab");
}
