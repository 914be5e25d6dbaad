//! Reports as text for the CLI: an aligned table, or CSV. Rows are a group
//! name and one cell per column.

use std::io::Write;

pub type Rows = Vec<(String, Vec<String>)>;

pub fn csv(out: &mut impl Write, by: &str, columns: &[&str], rows: &Rows) -> std::io::Result<()> {
    writeln!(out, "{by},{}", columns.join(","))?;
    for (group, cells) in rows {
        // Group names come from config (a safe alphabet) or dates.
        writeln!(out, "{group},{}", cells.join(","))?;
    }
    Ok(())
}

pub fn table(out: &mut impl Write, by: &str, columns: &[&str], rows: &Rows) -> std::io::Result<()> {
    let first = rows
        .iter()
        .map(|(g, _)| g.len())
        .chain([by.len()])
        .max()
        .unwrap_or(5);
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .filter_map(|(_, c)| c.get(i).map(String::len))
                .chain([columns[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    write!(out, "{by:<first$}")?;
    for (name, width) in columns.iter().zip(&widths) {
        write!(out, "  {name:>width$}")?;
    }
    writeln!(out)?;
    for (group, cells) in rows {
        write!(out, "{group:<first$}")?;
        for (cell, width) in cells.iter().zip(&widths) {
            write!(out, "  {cell:>width$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}
